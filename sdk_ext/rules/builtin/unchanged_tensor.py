"""UnchangedTensor: a tensor that has kept the same value over its last ``num_steps`` saved steps.

docs/RULES.md#unchangedtensor. At step ``s``, for each selected tensor (``collection_names`` ∪ ``tensor_regex``,
every tensor when both are empty): take its last ``num_steps`` saved steps up to and including
``s`` (saved steps, not necessarily consecutive); fewer than that, skip. Fires when every one of
them is ``np.allclose`` to the value at ``s`` with ``rtol``, ``atol``, ``equal_nan``.

Modes: the window holds steps of the mode of ``s`` only, and EVAL and PREDICT steps are not judged.
Weights cannot change while a model is evaluated, so two validation steps between training steps
(or the same validation batch run twice) are not a stalled model. smdebug's rule (never public; its
2019 tests use no modes) took the last saved steps of any mode (``prev_steps`` with GLOBAL), which
fired on a healthy job that validates every few steps. A trial without modes is all GLOBAL: unchanged.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

from sdk_ext.modes import ModeKeys
from sdk_ext.rules.builtin.base import BuiltinRule, is_numeric

#: Modes in which nothing trains: a tensor that does not change there is expected.
NOT_TRAINING = (ModeKeys.EVAL, ModeKeys.PREDICT)


def unchanged(values: Sequence[np.ndarray], *, rtol: float, atol: float, equal_nan: bool) -> bool:
    """True if every value has the last one's shape and is allclose to it."""
    last = np.asarray(values[-1])
    for v in values[:-1]:
        v = np.asarray(v)
        if v.shape != last.shape or not np.allclose(v, last, rtol=rtol, atol=atol, equal_nan=equal_nan):
            return False
    return True


class UnchangedTensor(BuiltinRule):
    """Fires when a selected tensor is unchanged across its last ``num_steps`` saved steps."""

    judges_on_selection = False  # a tensor is judged once it has a window of num_steps saved steps

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | list[str] | None = None,
        tensor_regex: str | list[str] | None = None,
        num_steps: int | str = 3,
        rtol: float | str = 1e-5,
        atol: float | str = 1e-8,
        equal_nan: bool | str = False,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.collection_names = self.params.strings("collection_names", collection_names)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.num_steps = self.params.integer("num_steps", num_steps, ge=2)
        self.rtol = self.params.number("rtol", rtol, ge=0)
        self.atol = self.params.number("atol", atol, ge=0)
        self.equal_nan = self.params.flag("equal_nan", equal_nan)
        self.params.done()
        self._modes: dict[int, ModeKeys] = {}  # global step -> its mode

    def needs_to_judge(self) -> str:
        return (f"each tensor saved at num_steps={self.num_steps} steps of one mode (TRAIN, or any steps of a job "
                "without modes; EVAL and PREDICT steps are not judged): save it more often, or lower num_steps")

    def _mode(self, step: int) -> ModeKeys:
        if step not in self._modes:
            self._modes[step] = self.mode_of(step)[0]
        return self._modes[step]

    def invoke_at_step(self, step: int) -> bool:
        mode = self._mode(step)
        if mode in NOT_TRAINING:
            return False
        for name in self.select(step, collections=self.collection_names, regex=self.tensor_regex):
            steps = [s for s in self.tensor_steps(name) if self._mode(s) == mode]
            window = steps[max(0, bisect.bisect_right(steps, step) - self.num_steps): bisect.bisect_right(steps, step)]
            if len(window) < self.num_steps or window[-1] != step:
                continue
            values = [self.value(name, s) for s in window]
            if any(v is None or not is_numeric(v) for v in values):
                continue
            self.judged([name])
            if unchanged(values, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan):
                return self.found_issue(
                    f"tensor {name!r} has not changed over its last {self.num_steps} saved "
                    f"{'' if mode is ModeKeys.GLOBAL else mode.name + ' '}steps {window}"
                )
        return False
