"""Reductions merged from pieces equal the reductions of the whole tensor (sdk_ext.pytorch.gather)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sdk_ext.format.paths import ALL_OPS
from sdk_ext.format.reductions import reduce as reduce_numpy
from sdk_ext.pytorch.partial_stats import merge_stats, partial_stats, stat_value

values = arrays(np.float32, st.integers(1, 40), elements=st.floats(-1e3, 1e3, width=32))


@settings(max_examples=60, deadline=None)
@given(values, st.lists(st.integers(0, 40), max_size=4), st.booleans())
def test_merged_pieces_give_the_whole_tensors_reductions(whole: np.ndarray, cuts: list[int], abs_: bool) -> None:
    bounds = sorted({0, len(whole), *[min(c, len(whole)) for c in cuts]})
    pieces = [whole[a:b] for a, b in zip(bounds, bounds[1:])] + [whole[:0]]  # an empty piece too
    merged = merge_stats(np.stack([partial_stats(torch.from_numpy(p.copy()), abs_=abs_) for p in pieces]))
    for op in ALL_OPS:
        expected = float(reduce_numpy(whole.astype(np.float64), op, abs=abs_)[0])
        got = stat_value(merged, op)
        scale = max(1.0, abs(expected)) if op not in ("prod",) else max(abs(expected), 1e-300)
        assert abs(got - expected) <= 1e-9 * scale + (1e-6 if op in ("std", "variance") else 0), (op, got, expected)


def test_unknown_op_is_refused() -> None:
    merged = merge_stats(np.stack([partial_stats(torch.ones(3), abs_=False)]))
    with pytest.raises(ValueError, match="median"):
        stat_value(merged, "median")
