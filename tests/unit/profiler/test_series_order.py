"""get_series orders samples as np.lexsort((timestamps, series)) does, whatever the files hold."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk_ext.profiler.system_metrics_reader import _series_order


@settings(max_examples=300, deadline=None)
@given(
    keys=st.integers(1, 6),
    samples=st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0.0, 0.5, 1.0, 1.5, float("nan"), -0.0])),
                     max_size=60),
    in_time_order=st.booleans(),
)
def test_the_order_is_lexsorts(keys: int, samples: list[tuple[int, float]], in_time_order: bool) -> None:
    if in_time_order:  # what a monitor writes: each series in time order (the usual, fast case)
        samples = sorted(samples, key=lambda s: (np.isnan(s[1]), s[1]))
    key_index = np.array([k % keys for k, _ in samples], dtype=np.int32)
    stamps = np.array([t for _, t in samples], dtype=np.float64)
    order, key_ids, in_order = _series_order(key_index, stamps, keys)
    expected = np.lexsort((stamps, key_index))
    assert order.tolist() == expected.tolist()
    assert key_ids.tolist() == key_index[expected].tolist()
    assert np.array_equal(in_order, stamps[expected], equal_nan=True)


def test_many_series_take_lexsort() -> None:
    key_index = np.array([40000, 3, 40000, 3], dtype=np.int32)
    stamps = np.array([2.0, 1.0, 1.0, 0.5])
    assert _series_order(key_index, stamps, 40001)[0].tolist() == np.lexsort((stamps, key_index)).tolist()
