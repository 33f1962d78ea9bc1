"""Reductions of a whole tensor from statistics of its pieces (what a sharded tensor saved only as
reductions sends instead of its values; see :mod:`sdk_ext.pytorch.gather`).

Each piece gives 9 numbers in float64: count, min, max, sum, product, mean, M2 (the sum of squared
deviations from its mean), sum of squares, sum of |x|. Merged (Chan's pairwise update for M2), they give
every reduction of :mod:`sdk_ext.format.reductions` over the whole tensor: min, max, mean, sum, prod,
std and variance (population), l1, l2; for the ``abs`` variants the pieces' statistics are taken of |x|.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

#: The reductions that merge from pieces.
MERGEABLE = frozenset({"min", "max", "mean", "sum", "prod", "std", "variance", "l1", "l2"})
_N, _MIN, _MAX, _SUM, _PROD, _MEAN, _M2, _SUMSQ, _SUMABS = range(9)
#: Statistics per piece (and per variant).
NSTATS = 9


def partial_stats(piece: torch.Tensor, *, abs_: bool) -> np.ndarray[Any, Any]:
    """The 9 statistics of one piece (count, min, max, sum, prod, mean, M2, sum of squares, sum of |x|),
    in float64, from which :func:`merge_stats` gives every mergeable reduction of the whole tensor."""
    with torch.no_grad():
        x = piece.detach().reshape(-1).to(torch.float64)
        if abs_:
            x = x.abs()
        n = x.numel()
        if n == 0:
            return np.array([0, np.inf, -np.inf, 0, 1, 0, 0, 0, 0], dtype=np.float64)
        mean = x.mean()
        values = torch.stack([
            torch.tensor(float(n), dtype=torch.float64, device=x.device), x.min(), x.max(), x.sum(), x.prod(), mean,
            ((x - mean) ** 2).sum(), (x * x).sum(), x.abs().sum(),
        ])
        return values.cpu().numpy()


def merge_stats(parts: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Statistics of the union of pieces (one row of :func:`partial_stats` each)."""
    parts = parts[parts[:, _N] > 0]
    out = np.zeros(NSTATS, dtype=np.float64)
    n = parts[:, _N].sum()
    out[_N] = n
    out[_MIN], out[_MAX] = parts[:, _MIN].min(), parts[:, _MAX].max()
    out[_SUM], out[_PROD] = parts[:, _SUM].sum(), np.prod(parts[:, _PROD])
    mean = out[_SUM] / n
    out[_MEAN] = mean
    out[_M2] = (parts[:, _M2] + parts[:, _N] * (parts[:, _MEAN] - mean) ** 2).sum()
    out[_SUMSQ], out[_SUMABS] = parts[:, _SUMSQ].sum(), parts[:, _SUMABS].sum()
    return out


def stat_value(stats: np.ndarray[Any, Any], op: str) -> float:
    """One reduction from merged statistics (population std/variance, as :mod:`sdk_ext.format.reductions`)."""
    n = stats[_N]
    value: float
    if op == "min":
        value = stats[_MIN]
    elif op == "max":
        value = stats[_MAX]
    elif op == "mean":
        value = stats[_MEAN]
    elif op == "sum":
        value = stats[_SUM]
    elif op == "prod":
        value = stats[_PROD]
    elif op == "variance":
        value = stats[_M2] / n
    elif op == "std":
        value = math.sqrt(stats[_M2] / n)
    elif op == "l1":
        value = stats[_SUMABS]
    elif op == "l2":
        value = math.sqrt(stats[_SUMSQ])
    else:
        raise ValueError(f"reduction {op!r} cannot be merged from pieces")
    return float(value)


__all__ = ["MERGEABLE", "NSTATS", "merge_stats", "partial_stats", "stat_value"]
