"""Reductions: what a stored reduction tensor means, computed one way for the hooks and the reader.

A hook that saves ``mean`` of a tensor ``fc.weight`` stores it as the tensor
``smdebug/reductions/mean/fc.weight`` (``smdebug/reductions/abs_mean/fc.weight`` for the mean of
``|x|``; :func:`sdk_ext.format.paths.reduction_tensor_name`, smdebug's names); a reader asked for a
reduction that step did not store computes it from the raw value. Both call :func:`reduce`, so a
reduction reads the same whether it was stored or computed.

Every op runs over all elements of the tensor, whatever its rank: ``min, max, mean, sum, prod``,
``std``/``variance`` with ddof=0 (population), ``l1`` = sum of |x|, ``l2`` = sqrt(sum of x^2)
(Frobenius for a matrix, NaN where an element is NaN). ``abs=True`` applies |x| first. Booleans count
as 0/1 except for ``min``/``max``. The result is a shape ``(1,)`` array of numpy's result dtype
(float32 in, float32 out; the mean of ints is float64; ``l2`` of ints is float64). A tensor of strings
or objects raises :class:`~sdk_ext.exceptions.UnsupportedDtypeError` and an empty tensor raises
:class:`~sdk_ext.exceptions.EmptyTensorError` (a ValueError), whatever the op: nothing to reduce is
never silently 0 for some ops, NaN for others and an error for the rest, as numpy would have it.

Deliberate difference from smdebug: its numpy path and its reader took the *matrix* norm of a 2-D
tensor (L1 = largest column sum, L2 = largest singular value, which raised on NaN) and failed on 3-D
and up, while its PyTorch path was element-wise with std/variance over N-1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sdk_ext.exceptions import ConfigError, EmptyTensorError, UnsupportedDtypeError
from sdk_ext.format.paths import ALL_OPS

#: op names as stored in reduction tensor names
OPS = ALL_OPS
_ALIASES = {"l1_norm": "l1", "l2_norm": "l2", "var": "variance"}

_FUNCS: dict[str, Callable[..., Any]] = {
    "min": np.min,
    "max": np.max,
    "mean": np.mean,
    "sum": np.sum,
    "prod": np.prod,
    "std": np.std,
    "variance": np.var,
}


def normalize_op(name: str) -> str:
    """The stored spelling of a reduction name (``l2_norm`` -> ``l2``, ``var`` -> ``variance``).

    Raises:
        ConfigError: not a reduction the format knows.
    """
    op = _ALIASES.get(name, name)
    if op not in OPS:
        raise ConfigError(
            f"unknown reduction {name!r}: use one of {', '.join(OPS)} (abs=True for the absolute-value variants)",
            where="reduction",
        )
    return op


def reduce(array: np.ndarray[Any, Any], op: str, *, abs: bool = False) -> np.ndarray[Any, Any]:
    """The reduction ``op`` (a name :func:`normalize_op` accepts) of ``array`` as a shape-(1,) array.

    Raises:
        ConfigError: ``op`` is unknown.
        UnsupportedDtypeError: the array holds strings or objects (a TypeError).
        EmptyTensorError: the array has no elements (a ValueError).
    """
    op = normalize_op(op)
    if array.dtype.kind not in "biufc":
        raise UnsupportedDtypeError(f"cannot compute {op!r} of a {array.dtype} tensor: reductions need numbers")
    if array.size == 0:
        raise EmptyTensorError(f"cannot compute {op!r} of an empty tensor (shape {array.shape})")
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
        value = _FUNCS[op](x)
    return np.asarray(value).reshape(1)


__all__ = ["OPS", "normalize_op", "reduce"]
