"""Step counting: the global step and the step within each mode.

Every step advances the global step (TRAIN, EVAL and PREDICT steps alike) and the step of its
mode; both start at 0. A step in mode GLOBAL (no mode was ever set) has the global step as its mode
step, as smdebug records it. The mode set while a step is open applies from the next step on.
"""

from __future__ import annotations

from typing import NamedTuple

from sdk_ext.modes import ModeKeys


class Step(NamedTuple):
    global_step: int
    mode: ModeKeys
    mode_step: int


class StepCounter:
    """Counts steps; ``mode`` is the mode of the steps to come."""

    def __init__(self) -> None:
        self.mode = ModeKeys.GLOBAL
        self.current = Step(-1, ModeKeys.GLOBAL, -1)
        self._mode_steps: dict[ModeKeys, int] = {}

    def next(self, global_step: int | None = None) -> Step:
        """Advance to the next step; ``global_step`` jumps ahead (it must be larger than the last)."""
        last = self.current.global_step
        if global_step is None:
            global_step = last + 1
        elif global_step <= last:
            raise ValueError(f"begin_step({global_step}): steps must increase (the last was {last})")
        mode = self.mode
        if mode is ModeKeys.GLOBAL:
            mode_step = global_step
        else:
            mode_step = self._mode_steps.get(mode, -1) + 1
            self._mode_steps[mode] = mode_step
        self.current = Step(global_step, mode, mode_step)
        return self.current


__all__ = ["Step", "StepCounter"]
