"""The live status line of ``sdk-ext run`` (terminal only): where training is, as the trial shows it.

    mnist-20250101: Training | step 58 (TRAIN 42) | loss 0.4123 | 0:01:07 | ExplodingTensor=InProgress

The step is the last one the hook saved (global, and the mode's own count when modes are set), the
loss the latest saved value of a loss tensor (the ``losses`` collection, else a name with "loss").
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdk_ext.exceptions import SdkExtError
from sdk_ext.modes import ModeKeys

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Seen:
    """What the trial showed last: the step, its mode and mode step, the latest loss."""

    step: int | None = None
    mode: str | None = None
    mode_step: int | None = None
    loss: float | None = None


def elapsed_text(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def status_line(describe: Mapping[str, Any], seen: Seen, elapsed: float) -> str:
    """One line: job state, last saved step (and mode step), latest loss, elapsed time, rule states."""
    parts = [f"{describe['TrainingJobName']}: {describe['SecondaryStatus']}"]
    if seen.step is not None:
        mode = f" ({seen.mode} {seen.mode_step})" if seen.mode and seen.mode_step is not None else ""
        parts.append(f"step {seen.step}{mode}")
    if seen.loss is not None:
        parts.append(f"loss {seen.loss:.4g}" if math.isfinite(seen.loss) else f"loss {seen.loss}")
    parts.append(elapsed_text(elapsed))
    rules = " ".join(f"{r['RuleConfigurationName']}={r['RuleEvaluationStatus']}"
                     for r in describe.get("DebugRuleEvaluationStatuses") or [])
    if rules:
        parts.append(rules)
    return " | ".join(parts)


class TrialWatch:
    """Reads the last saved step and loss of a trial that is being written (opened once it has data)."""

    def __init__(self, trial_dir: Path, *, opener: Callable[[str], Any] | None = None) -> None:
        self.trial_dir = trial_dir
        self._opener = opener
        self._trial: Any = None
        self._loss_name: str | None = None

    def _open(self) -> Any:
        if self._trial is None:
            if not any((self.trial_dir / "index").glob("*/*")) and not any((self.trial_dir / "events").glob("*")):
                return None
            if self._opener is not None:
                self._trial = self._opener(os.fspath(self.trial_dir))
            else:
                from sdk_ext.trials import create_trial

                self._trial = create_trial(os.fspath(self.trial_dir), timeout=0)
        return self._trial

    def seen(self) -> Seen:
        """What the trial shows now; an empty :class:`Seen` while it has no data or cannot be read."""
        try:
            trial = self._open()
            if trial is None:
                return Seen()
            steps = trial.steps()
            if not steps:
                return Seen()
            step = steps[-1]
            mode, mode_step = trial.mode_modestep(step)
            mode_name = mode.name if isinstance(mode, ModeKeys) and mode is not ModeKeys.GLOBAL else None
            return Seen(step, mode_name, mode_step if mode_name else None, self._loss(trial))
        except (SdkExtError, OSError, ValueError) as err:
            logger.debug("progress: trial %s not read: %s", self.trial_dir, err)
            return Seen()

    def _loss(self, trial: Any) -> float | None:
        if self._loss_name is None:
            names: list[str] = []
            if "losses" in trial.collections():
                names = [n for n in sorted(trial.collection("losses").tensor_names) if trial.has_tensor(n)]
            names = names or [n for n in trial.tensor_names() if "loss" in n.lower() and not n.startswith("gradient")]
            if not names:
                return None
            self._loss_name = names[0]
        tensor = trial.tensor(self._loss_name)
        steps = tensor.steps()
        if not steps:
            return None
        value = tensor.value(steps[-1])
        return float(value.reshape(-1)[0]) if value.size else None


class Clock:
    """Elapsed seconds since creation (monotonic)."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self._start


__all__ = ["Clock", "Seen", "TrialWatch", "elapsed_text", "status_line"]
