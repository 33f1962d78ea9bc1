"""Torch tensors to stored arrays: the copy-free path for parameters and gradients, and the others."""

from __future__ import annotations

import numpy as np
import torch

from sdk_ext.pytorch.tensors import to_numpy


def test_tensors_with_and_without_autograd_history_convert_to_the_same_values() -> None:
    w = torch.nn.Linear(3, 2).weight  # requires grad: must be detached first
    assert w.requires_grad
    np.testing.assert_array_equal(to_numpy(w), w.detach().numpy())
    data = w.data  # no grad: used as it is, sharing memory (the writer copies it out before returning)
    out = to_numpy(data)
    assert np.shares_memory(out, data.numpy())
    (grad,) = torch.autograd.grad((w**2).sum(), w, create_graph=True)
    assert grad.requires_grad  # a gradient with history
    np.testing.assert_array_equal(to_numpy(grad), grad.detach().numpy())


def test_bfloat16_complex_conj_and_sparse_tensors_are_stored_as_plain_arrays() -> None:
    b = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    assert to_numpy(b).dtype == np.float32 and to_numpy(b).tolist() == [1.5, -2.0]
    c = torch.tensor([1 + 2j]).conj()
    assert to_numpy(c).tolist() == [1 - 2j]
    s = torch.eye(2).to_sparse()
    assert to_numpy(s).tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_a_negative_view_is_stored_with_its_values() -> None:
    """The imaginary part of a conjugate view carries torch's negative bit, which ``Tensor.numpy()`` refuses."""
    n = torch.tensor([1 + 2j, 3 - 4j]).conj().imag
    assert n.is_neg()
    assert to_numpy(n).tolist() == [-2.0, 4.0]
