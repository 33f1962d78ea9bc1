"""Reductions computed on read, when a step stored the raw tensor but not the reduction asked for.

Same arithmetic as smdebug's reader (numpy over the whole array): ``min max mean std variance sum
prod`` (std/variance with N, ``ddof=0``), and the norms ``l1``/``l2`` as ``np.linalg.norm(x, ord)``
on the array as it is, so a 2-D tensor gets the matrix norm (max column sum / spectral norm) that
smdebug's numpy writers store. Deliberate difference: where that norm is undefined (3 or more
dimensions; smdebug raises ``ValueError: Improper number of dimensions to norm``) the element-wise
norm of the flattened array is returned, which is what the PyTorch hook stores for any rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sdk_ext.exceptions import ConfigError, UnsupportedDtypeError
from sdk_ext.format.paths import ALL_OPS, NORM_OPS

#: op names accepted by reduction_value (the names used in stored reduction tensors)
OPS = ALL_OPS
_ALIASES = {"l1_norm": "l1", "l2_norm": "l2", "var": "variance"}

_FUNCS: dict[str, Callable[..., Any]] = {
    "min": np.amin,
    "max": np.amax,
    "mean": np.mean,
    "std": np.std,
    "variance": np.var,
    "sum": np.sum,
    "prod": np.prod,
}


def normalize_op(name: str) -> str:
    """The stored spelling of a reduction name (``l2_norm`` -> ``l2``).

    Raises:
        ConfigError: not a reduction smdebug knows.
    """
    op = _ALIASES.get(name, name)
    if op not in OPS:
        raise ConfigError(
            f"unknown reduction {name!r}: use one of {', '.join(OPS)} (abs=True for the absolute-value variants)",
            where="reduction",
        )
    return op


def compute_reduction(op: str, value: np.ndarray[Any, Any], *, abs: bool = False) -> Any:
    """The reduction ``op`` of ``value`` (of ``|value|`` when ``abs``), as a numpy scalar.

    Raises:
        UnsupportedDtypeError: the array holds strings (or other non-numbers).
    """
    op = normalize_op(op)
    if value.dtype.kind not in "biufc":
        raise UnsupportedDtypeError(f"cannot compute {op!r} of a {value.dtype} tensor: reductions need numbers")
    data = np.absolute(value) if abs else value
    if op in NORM_OPS:
        order = 1 if op == "l1" else 2
        if data.ndim == 0:
            data = data.reshape(1)
        elif data.ndim > 2:
            data = data.reshape(-1)
        return np.linalg.norm(data, ord=order)
    return _FUNCS[op](data)


__all__ = ["OPS", "compute_reduction", "normalize_op"]
