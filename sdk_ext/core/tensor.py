"""``smdebug.core.tensor``: the trial's ``Tensor`` and the ``StepState`` answers of ``has_passed_step``."""

from sdk_ext.modes import StepState
from sdk_ext.trials.tensor import Tensor

__all__ = ["StepState", "Tensor"]
