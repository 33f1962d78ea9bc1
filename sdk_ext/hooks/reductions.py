"""Reductions of a tensor, computed the same way by every hook.

Every op runs over all elements of the tensor, whatever its rank: ``min, max, mean, sum, prod``,
``std``/``variance`` with ddof=0 (population), ``l1`` = sum of |x|, ``l2`` = sqrt(sum of x^2)
(Frobenius for a matrix). ``abs`` applies |x| first. Results are stored as shape ``(1,)`` arrays of
numpy's result dtype (float32 in, float32 out; the mean of ints is float64).

Deliberate difference from smdebug: its numpy path took the *matrix* norm of a 2-D tensor (L1 =
largest column sum, L2 = largest singular value) and failed on 3-D and up, while its PyTorch path
was element-wise with std/variance over N-1. Here every hook agrees, and the l2 of a weight matrix
is the number a rule author expects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_FUNCS: dict[str, Callable[..., Any]] = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "sum": np.sum,
    "prod": np.prod,
    "std": np.std,
    "variance": np.var,
}


def reduce_numpy(array: np.ndarray[Any, Any], op: str, *, abs: bool = False) -> np.ndarray[Any, Any]:
    """One reduction of ``array`` as a shape-(1,) array.

    Raises:
        ValueError: ``op`` is unknown, or the array cannot be reduced (strings, empty).
        TypeError: the dtype does not support the op.
    """
    if array.dtype.kind in "USO":
        raise TypeError(f"cannot reduce a tensor of dtype {array.dtype}")
    if array.size == 0:
        raise ValueError("cannot reduce an empty tensor")
    x = array
    if x.dtype.kind == "b" and op not in ("min", "max"):
        x = x.astype(np.int64)
    if abs:
        x = np.abs(x)
    if op == "l1":
        value = np.sum(np.abs(x))
    elif op == "l2":
        flat = x.reshape(-1)
        if flat.dtype.kind not in "fc":
            flat = flat.astype(np.float64)
        value = np.linalg.norm(flat)
    else:
        func = _FUNCS.get(op)
        if func is None:
            raise ValueError(f"unknown reduction {op!r}")
        value = func(x)
    return np.asarray(value).reshape(1)


__all__ = ["reduce_numpy"]
