"""``smdebug.core.reduction_config``: ``ReductionConfig`` and the reductions it accepts."""

from sdk_ext.format.paths import NORM_OPS, REDUCTION_OPS
from sdk_ext.hooks.reduction_config import ReductionConfig

ALLOWED_REDUCTIONS: list[str] = list(REDUCTION_OPS)
ALLOWED_NORMS: list[str] = list(NORM_OPS)

__all__ = ["ALLOWED_NORMS", "ALLOWED_REDUCTIONS", "ReductionConfig"]
