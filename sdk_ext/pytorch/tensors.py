"""Torch tensors to stored values: conversion, reductions on the tensor's device, naming of module tensors.

* Storage: :func:`sdk_ext.hooks.tensors.to_numpy`, the conversion every framework hook shares (re-exported
  here): ``t.detach()`` on the CPU, bfloat16 as float32.
* Reductions of floating-point tensors are computed with torch where the tensor lives (no copy of
  the whole tensor to the host when only reductions are saved), with the semantics of
  :mod:`sdk_ext.format.reductions` (element-wise over all elements, population std/variance).
  Half and bfloat16 tensors are reduced in float32. Other dtypes use the numpy path.
* Module tensors are named ``{module}_input_{i}`` / ``{module}_output_{i}``; ``i`` counts the
  tensors of (nested) tuples, lists and dicts, and keeps counting over repeated calls in a step.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from sdk_ext.hooks.tensors import to_numpy  # the conversion every framework hook shares

_WIDEN = (torch.float16, torch.bfloat16)


def torch_reductions(t: torch.Tensor, ops: tuple[tuple[str, bool], ...]) -> dict[tuple[str, bool], np.ndarray[Any, Any]]:
    """``{(op, abs): shape-(1,) array}`` for a floating-point tensor; empty for other dtypes."""
    if not ops or not t.is_floating_point() or t.numel() == 0:
        return {}
    with torch.no_grad():
        x = t.detach()
        if x.dtype in _WIDEN:
            x = x.float()
        values = []
        ax = None
        for op, is_abs in ops:
            if is_abs:
                if ax is None:
                    ax = x.abs()
                v = ax
            else:
                v = x
            values.append(_reduce(v, op))
        stacked = torch.stack(values).cpu().numpy()
    return {key: stacked[i : i + 1] for i, key in enumerate(ops)}


def _reduce(x: torch.Tensor, op: str) -> torch.Tensor:
    if op == "min":
        return x.min()
    if op == "max":
        return x.max()
    if op == "mean":
        return x.mean()
    if op == "sum":
        return x.sum()
    if op == "prod":
        return x.prod()
    if op == "std":
        return x.std(correction=0)
    if op == "variance":
        return x.var(correction=0)
    if op == "l1":
        return x.abs().sum()
    if op == "l2":
        norm: torch.Tensor = torch.linalg.vector_norm(x)
        return norm
    raise ValueError(f"unknown reduction {op!r}")


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a module's inputs or outputs, depth first."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from iter_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_tensors(item)


__all__ = ["iter_tensors", "to_numpy", "torch_reductions"]
