"""Per-unit activity of a layer's activations, shared by DeadRelu and SaturatedActivation.

Reading chosen where SageMaker documents no exact formula: a *unit* is one index of axis 1 (a neuron of a
``(batch, units)`` output, a channel of an NCHW feature map); a 1-D tensor is one sample, each
element a unit. A unit's activity is the percentage of its values (over the batch and any spatial
axes) that are "active".
"""

from __future__ import annotations

import numpy as np


def unit_activity_percent(active: np.ndarray) -> np.ndarray:
    """Percentage of True per unit of a boolean activation mask (see module docstring for "unit")."""
    active = np.asarray(active, dtype=bool)
    if active.ndim == 0:
        raise ValueError("a scalar has no units")
    if active.ndim == 1:
        return active.astype(np.float64) * 100.0
    per_unit = np.moveaxis(active, 1, 0).reshape(active.shape[1], -1)
    if per_unit.shape[1] == 0:
        return np.zeros(active.shape[1])
    return np.asarray(per_unit.mean(axis=1) * 100.0, dtype=np.float64)


def inactive_unit_percent(active: np.ndarray, threshold_inactivity: float) -> float:
    """Percentage of units whose activity is below ``threshold_inactivity`` percent."""
    activity = unit_activity_percent(active)
    if activity.size == 0:
        return 0.0
    return 100.0 * float(np.count_nonzero(activity < threshold_inactivity)) / activity.size
