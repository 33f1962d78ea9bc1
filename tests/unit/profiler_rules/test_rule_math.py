"""The profiler rules' arithmetic, against plain re-statements of smdebug's per-event loops (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sdk_ext.profiler.analysis.rules.batch_size import total_cpu
from sdk_ext.profiler.analysis.rules.bottleneck import bottleneck_counts, snapshot_times
from sdk_ext.profiler.analysis.rules.dataloader import workers_per_second
from sdk_ext.profiler.analysis.rules.gpu_memory_increase import moving_average_increase
from sdk_ext.profiler.analysis.rules.load_balancing import js_distance, utilization_histogram
from sdk_ext.profiler.analysis.rules.low_gpu_utilization import FLUCTUATING, UNDERUTILIZED, gpu_verdict
from sdk_ext.profiler.analysis.rules.series import History, box_stats, group_sum
from sdk_ext.profiler.analysis.rules.step_outlier import outlier_mask

try:
    from scipy.spatial import distance as scipy_distance
except ImportError:  # scipy comes with the test extra's scikit-learn; without it that one test skips
    scipy_distance = None

relaxed = settings(deadline=None)  # the machine running the tests is shared: no per-example deadline

percent = st.floats(0, 100, allow_nan=False)
percents = arrays(np.float64, st.integers(1, 60), elements=percent)


@relaxed
@given(st.lists(st.floats(0, 5, allow_nan=False), max_size=80), st.floats(-1, 1, allow_nan=False))
def test_snapshots_match_the_per_event_loop(raw, current):
    ts = np.sort(np.asarray(raw, dtype=np.float64))
    times, started, last = snapshot_times(ts, window_s=0.02, current=current)
    cur, count, expected = current, 0, []
    for t in ts:
        if abs(cur - t) > 0.02:
            cur, count = float(t), count + 1
        expected.append(cur)
    assert times.tolist() == expected and started == count and last == cur


def test_bottleneck_counts_per_snapshot():
    times, low, high = bottleneck_counts(np.array([1.0, 1.0, 2.0, 2.0, 2.0]),
                                         np.array([True, False, True, True, False]),
                                         np.array([False, True, False, False, False]))
    assert times.tolist() == [1.0, 2.0] and low.tolist() == [1, 2] and high.tolist() == [1, 0]


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(0, 40), elements=percent), st.integers(1, 8), st.integers(0, 40))
def test_moving_average_increase_matches_the_per_sample_loop(values, window, since):
    counts, diffs = moving_average_increase(values, window, since=since)
    expected = {}
    for n in range(1, values.size + 1):
        v = values[:n]
        if n > window + 1 and n > since:
            with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning) if window == 1 else _nothing():
                expected[n] = np.mean(v[-window:]) - np.mean(v[-window - 1:-2])
    assert counts.tolist() == list(expected)
    for n, d in zip(counts, diffs):
        assert (math.isnan(d) and math.isnan(expected[n])) or d == pytest.approx(expected[n], abs=1e-9)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@relaxed
@given(percents, st.floats(0, 100), st.floats(0, 100))
def test_gpu_verdict_is_the_quantile_test(values, p95_limit, p5_limit):
    p95, p5 = np.quantile(values, 0.95), np.quantile(values, 0.05)
    expected = UNDERUTILIZED if p95 < p95_limit else FLUCTUATING if p95 > p95_limit and p5 < p5_limit else None
    assert gpu_verdict(values, threshold_p95=p95_limit, threshold_p5=p5_limit) == expected


@relaxed
@given(percents, percents)
def test_js_distance_is_a_bounded_symmetric_distance(a, b):
    h1, h2 = utilization_histogram(a), utilization_histogram(b)
    d = js_distance(h1, h2)
    assert 0 <= d <= math.sqrt(math.log(2)) + 1e-12
    assert d == pytest.approx(js_distance(h2, h1)) and js_distance(h1, h1) == pytest.approx(0, abs=1e-7)
    assert h1.sum() == a.size  # every value lands in a bin, 100% included


@pytest.mark.skipif(scipy_distance is None, reason="scipy is not installed")
@relaxed
@given(percents, percents)
def test_js_distance_equals_scipys(a, b):
    h1, h2 = utilization_histogram(a), utilization_histogram(b)
    assert js_distance(h1, h2) == pytest.approx(scipy_distance.jensenshannon(h1, h2), abs=1e-7)


def test_js_distance_of_an_empty_histogram_is_nan():
    assert math.isnan(js_distance([0, 0], [1, 0]))


@relaxed
@given(arrays(np.float64, st.integers(1, 50), elements=st.floats(0.001, 10)), st.floats(0, 5))
def test_outliers_are_above_mean_plus_k_stddev(durations, k):
    mask, limit = outlier_mask(durations, k)
    assert limit == pytest.approx(durations.mean() + k * durations.std())
    assert mask.tolist() == [d > limit for d in durations]


@relaxed
@given(st.lists(st.tuples(st.floats(0, 5e6, allow_nan=False), st.integers(-1, 4)), max_size=40))
def test_workers_per_second_counts_distinct_pids(events):
    starts = np.array([s for s, _ in events], dtype=np.float64)
    expected: dict[int, set[int]] = {}
    for s, pid in events:
        expected.setdefault(int(s // 1e6), set()).update([pid] if pid >= 0 else [])
    assert workers_per_second(starts, [p for _, p in events]) == [len(v) for _, v in sorted(expected.items())]


@relaxed
@given(st.lists(st.tuples(st.sampled_from([1.0, 1.1, 1.2]), st.floats(0, 100)), min_size=1, max_size=30),
       st.integers(1, 8))
def test_total_cpu_sums_each_instant_over_the_cores(records, cores):
    ts, vals = np.array([t for t, _ in records]), np.array([v for _, v in records])
    sums: dict[float, float] = {}
    for t, v in records:
        sums[t] = sums.get(t, 0.0) + v
    assert total_cpu(ts, vals, cores) == pytest.approx([sums[t] / cores for t in sorted(sums)])
    assert group_sum(ts, vals)[0].tolist() == sorted(sums)


@relaxed
@given(st.lists(arrays(np.float64, st.integers(0, 30)), max_size=12), st.integers(5, 50))
def test_history_is_the_concatenation_until_it_starts_over(parts, limit):
    history, expected = History(limit=limit), np.zeros(0)
    for part in parts:
        history.extend(part)
        expected = np.concatenate([expected, part])
        if expected.size > limit:
            expected = part[-limit:]
        np.testing.assert_array_equal(history.values, expected)


def test_box_stats_clip_whiskers_to_the_data():
    stats = box_stats(np.array([0.0, 10, 10, 10, 100]))
    assert (stats["p25"], stats["p50"], stats["p75"]) == (10, 10, 10)
    assert stats["upper"] == 10 and stats["lower"] == 10
    assert box_stats(np.arange(101.0))["upper"] == 100
