"""get_series orders samples as np.lexsort((timestamps, series)) does, whatever the files hold."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk_ext.format.profiler_records import SeriesKey, SystemMetricColumns
from sdk_ext.profiler.system_metrics_reader import _periodic_series, _series_order


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


@settings(max_examples=300, deadline=None)
@given(
    order=st.permutations(range(4)),
    samples=st.integers(0, 6),
    stamps=st.lists(st.sampled_from([0.0, 0.5, 1.0, float("nan")]), min_size=24, max_size=24),
    in_time_order=st.booleans(),
    damage=st.sampled_from([None, "repeat a series", "swap two in one sample", "cut a sample"]),
)
def test_a_window_of_whole_samples_gives_the_series_the_sort_gives(
    order: list[int], samples: int, stamps: list[float], in_time_order: bool, damage: str | None
) -> None:
    keys = tuple(SeriesKey("algo-1", "cpu", f"cpu{k}", "CPUUtilization") for k in range(4))
    key_index = np.array(order * samples, dtype=np.int32)
    times = np.array(stamps[: len(key_index)], dtype=np.float64)
    if in_time_order:
        times = np.repeat(np.arange(samples, dtype=np.float64), 4)
    if damage == "repeat a series" and samples:
        key_index[1] = key_index[0]
    elif damage == "swap two in one sample" and samples > 1:
        key_index[4], key_index[5] = key_index[5], key_index[4]
    elif damage == "cut a sample" and samples:
        key_index, times = key_index[:-1], times[:-1]
    values = np.arange(len(key_index), dtype=np.float64)
    window = SystemMetricColumns(keys, key_index, values, times)
    got = _periodic_series(window)
    if got is None:
        return  # the sort decides (test_the_order_is_lexsorts)
    sort = np.lexsort((times, key_index))
    expected = {}
    for k in sorted(set(key_index.tolist())):
        chosen = sort[key_index[sort] == k]
        expected[keys[k]] = (times[chosen].tolist(), values[chosen].tolist())
    assert list(got) == sorted(expected)
    for key, series in got.items():
        assert np.array_equal(series.timestamps, expected[key][0], equal_nan=True)
        assert series.values.tolist() == expected[key][1]
