"""Framework tensors as the arrays the writer stores: one conversion every framework hook shares.

* A torch tensor (the PyTorch hook, Keras on its torch backend): ``detach()`` on the CPU as a numpy array
  of the same dtype. ``bfloat16`` has no numpy dtype that smdebug (or plain numpy) reads, so it is stored
  as float32: exact, since every bfloat16 is a float32 with the low 16 bits zero. Conjugate and negative
  views are resolved and sparse tensors made dense.
* Anything else numpy takes (numpy arrays and scalars, Python numbers; a TensorFlow or JAX tensor after its
  framework's ``.numpy()``): :func:`sdk_ext.format.events.to_numpy`.

torch is never imported here: a value is a torch tensor only if torch made it, so torch is already loaded.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from sdk_ext.format.events import to_numpy as np_to_numpy


def to_numpy(value: Any) -> np.ndarray[Any, Any]:
    """A tensor (torch, or anything numpy accepts) as the array to store."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach() if value.requires_grad else value  # parameters' .data and gradients need no detach
        try:  # the common case: a CPU tensor numpy takes as it is (one call instead of five checks)
            array: np.ndarray[Any, Any] = t.numpy()
            return array
        except (RuntimeError, TypeError):  # bfloat16, another device, a conjugate or negative view, sparse
            pass
        if t.dtype is torch.bfloat16:
            t = t.float()
        if not t.is_cpu:
            t = t.cpu()
        if t.is_conj():
            t = t.resolve_conj()
        if t.is_neg():
            t = t.resolve_neg()
        if t.layout is not torch.strided:
            t = t.to_dense()
        array = t.numpy()
        return array
    return np_to_numpy(value)


__all__ = ["to_numpy"]
