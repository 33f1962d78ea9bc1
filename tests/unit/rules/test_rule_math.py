"""The pure arithmetic of each built-in rule, with hypothesis."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sdk_ext.format.reductions import reduce
from sdk_ext.rules.builtin.all_zero import zero_percent
from sdk_ext.rules.builtin.check_input_images import channel_sums
from sdk_ext.rules.builtin.class_imbalance import imbalance, to_classes
from sdk_ext.rules.builtin.confusion import confusion_matrix, confusion_problem
from sdk_ext.rules.builtin.dead_relu import dead_unit_percent
from sdk_ext.rules.builtin.exploding_tensor import count_bad
from sdk_ext.rules.builtin.feature_importance_overweight import top_share
from sdk_ext.rules.builtin.loss_not_decreasing import baseline_step, loss_verdict
from sdk_ext.rules.builtin.nlp_sequence_ratio import token_percent
from sdk_ext.rules.builtin.overfit import overfit_ratio
from sdk_ext.rules.builtin.overtraining import Plateau
from sdk_ext.rules.builtin.poor_weight_initialization import spread, variance_ratio
from sdk_ext.rules.builtin.saturated_activation import activation_kind, saturated_unit_percent
from sdk_ext.rules.builtin.similar_across_runs import difference
from sdk_ext.rules.builtin.tensor_variance import variance_problem
from sdk_ext.rules.builtin.tree_depth import depth_from_node_ids
from sdk_ext.rules.builtin.unchanged_tensor import unchanged
from sdk_ext.rules.builtin.units import unit_activity_percent
from sdk_ext.rules.builtin.vanishing_gradient import is_vanishing
from sdk_ext.rules.builtin.weight_update_ratio import previous_step, update_ratio

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
arrays = hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=6), elements=finite)
batches = hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=5), elements=finite)
steps_lists = st.lists(st.integers(0, 10_000), min_size=0, max_size=30, unique=True).map(sorted)


@given(arrays)
def test_the_vanishing_measure_is_the_mean_of_absolute_values(g):
    m = float(reduce(g, "mean", abs=True)[0])  # what the rule reads when the hook saved the raw value
    assert m == pytest.approx(float(np.mean(np.abs(g))))
    assert m >= 0
    assert is_vanishing(m, m + 1) and not is_vanishing(m, m)


@given(arrays, st.integers(0, 5), st.integers(0, 5))
def test_count_bad_counts_nan_and_inf(a, nans, infs):
    flat = a.ravel().copy()
    k = min(nans + infs, flat.size)
    flat[: min(nans, k)] = np.nan
    flat[min(nans, k): k] = np.inf
    assert count_bad(flat, only_nan=False) == (min(nans, k), k - min(nans, k))
    assert count_bad(flat, only_nan=True) == (min(nans, k), 0)
    assert count_bad(flat.astype(np.int64) if k == 0 else np.arange(3), only_nan=False) == (0, 0)


@given(arrays)
def test_difference_is_none_exactly_for_equal_values(a):
    assert difference(a, a.copy()) is None
    assert difference(a, a.reshape(-1, 1) if a.ndim == 1 else a.ravel()) is not None  # shape differs
    b = a + 1.0 + np.abs(a)  # moved by at least 1 everywhere, far beyond the tolerance
    assert difference(a, b) is not None


@given(arrays, finite.filter(lambda x: abs(x) > 1e-3))
def test_update_ratio_is_zero_for_no_update_and_scale_invariant(w, scale):
    assume(np.linalg.norm(w) > 1e-3)
    assert update_ratio(w, w, 1e-9) == 0.0
    moved = w * 1.01
    assert update_ratio(w, moved, 0.0) == pytest.approx(0.01, rel=1e-6)
    assert update_ratio(w * scale, moved * scale, 0.0) == pytest.approx(update_ratio(w, moved, 0.0), rel=1e-6)


@given(steps_lists, st.integers(0, 10_000), st.one_of(st.none(), st.integers(1, 100)))
def test_previous_step_is_the_latest_earlier_saved_step_in_the_window(steps, step, num_steps):
    p = previous_step(steps, step, num_steps)
    earlier = [s for s in steps if s < step and (num_steps is None or s >= step - num_steps)]
    assert p == (max(earlier) if earlier else None)


@given(arrays)
def test_zero_percent_matches_a_count(a):
    pct = zero_percent(a)
    assert 0 <= pct <= 100
    assert pct == pytest.approx(100 * np.mean(a == 0))
    assert zero_percent(np.zeros_like(a)) == 100


@given(st.lists(arrays, min_size=1, max_size=4), st.floats(1e-3, 10))
def test_unchanged_holds_for_copies_and_fails_for_a_real_change(values, bump):
    same = [values[0].copy() for _ in values]
    assert unchanged(same, rtol=1e-5, atol=1e-8, equal_nan=False)
    changed = [*same[:-1], same[-1] + bump + np.abs(same[-1])]
    assert len(changed) == 1 or not unchanged(changed, rtol=1e-5, atol=1e-8, equal_nan=False)


@given(finite.filter(lambda x: abs(x) > 1e-6), st.floats(0, 50), st.floats(0, 50), st.floats(-0.99, 0.99))
def test_loss_verdict_follows_the_two_documented_parameters(prev, diff_percent, inc_percent, rel):
    cur = prev + rel * abs(prev)
    change = (cur - prev) / abs(prev) * 100  # the documented percentage, as float arithmetic gives it
    why = loss_verdict(prev, cur, diff_percent=diff_percent, increase_threshold_percent=inc_percent)
    if change <= 0:
        assert (why is not None) == (-change < diff_percent - 1e-9) or abs(-change - diff_percent) < 1e-6
    else:
        assert (why is not None) == (change > inc_percent + 1e-9) or abs(change - inc_percent) < 1e-6


def test_loss_verdict_plateau_fires_and_small_rise_is_tolerated():
    assert loss_verdict(1.0, 1.0, diff_percent=0.1, increase_threshold_percent=5) is not None
    assert loss_verdict(1.0, 1.03, diff_percent=0.1, increase_threshold_percent=5) is None
    assert loss_verdict(1.0, 0.5, diff_percent=0.1, increase_threshold_percent=5) is None
    assert loss_verdict(0.0, 0.0, diff_percent=0.1, increase_threshold_percent=5) is not None  # prev 0: absolute


@given(steps_lists, st.integers(0, 10_000), st.integers(1, 50))
def test_baseline_step_is_at_least_num_steps_back(steps, step, n):
    b = baseline_step(steps, step, n)
    ok = [s for s in steps if s <= step - n]
    assert b == (max(ok) if ok else None)


@given(finite.filter(lambda x: abs(x) > 1e-6), finite)
def test_overfit_ratio_sign_follows_eval_minus_train(train, ev):
    r = overfit_ratio(train, ev)
    assert np.sign(r) == np.sign(ev - train) or abs(ev - train) < 1e-12


@given(st.lists(finite, min_size=1, max_size=40), st.floats(0, 1))
def test_plateau_wait_counts_values_since_the_last_improvement(losses, delta):
    p = Plateau()
    best, wait = np.inf, 0
    for x in losses:
        got = p.add(x, delta)
        if x < best - delta:
            best, wait = x, 0
        else:
            wait += 1
        assert got == wait and p.best == best


def test_variance_problem_both_sides():
    assert variance_problem(11, max_threshold=10, min_threshold=None) is not None
    assert variance_problem(1e-6, max_threshold=10, min_threshold=1e-5) is not None
    assert variance_problem(1.0, max_threshold=10, min_threshold=1e-5) is None


@given(hnp.arrays(np.bool_, hnp.array_shapes(min_dims=1, max_dims=4, max_side=5)))
def test_unit_activity_has_one_percentage_per_unit(mask):
    activity = unit_activity_percent(mask)
    assert activity.shape == ((mask.shape[0],) if mask.ndim == 1 else (mask.shape[1],))
    assert np.all((activity >= 0) & (activity <= 100))


@given(batches)
def test_dead_units_all_or_nothing(a):
    assert dead_unit_percent(np.abs(a) + 1, 1.0) == 0
    assert dead_unit_percent(-np.abs(a), 1.0) == 100


@given(batches)
def test_saturation_of_inputs_inside_and_outside_the_range(a):
    inside = np.clip(a, -1, 1)
    assert saturated_unit_percent(inside, -9.5, 9.5, 1.0) == 0
    assert saturated_unit_percent(np.abs(a) + 10, -9.5, 9.5, 1.0) == 100
    assert activation_kind("Net/Tanh_input_0") == "tanh" and activation_kind("sig") is None


@given(st.lists(st.floats(1e-6, 1e6), min_size=1, max_size=10))
def test_variance_ratio_is_at_least_one(variances):
    assert variance_ratio(variances) >= 1
    assert variance_ratio([0.0, 1.0]) == np.inf and variance_ratio([0.0, 0.0]) == 1


@given(hnp.arrays(np.float64, st.integers(2, 200), elements=finite))
def test_spread_is_the_p5_p95_range(g):
    assert spread(g) == pytest.approx(float(np.percentile(g, 95) - np.percentile(g, 5)), abs=1e-6)
    assert spread(np.full(10, 3.0)) == 0


@given(st.lists(st.integers(0, 9), min_size=1, max_size=200))
def test_confusion_matrix_counts_every_sample(labels):
    y = np.array(labels)
    m = confusion_matrix(y, y, 10)
    assert m.sum() == y.size and np.trace(m) == y.size
    assert confusion_problem(m, min_diag=0.9, max_off_diag=0.1) is None
    wrong = (y + 1) % 10
    assert confusion_problem(confusion_matrix(y, wrong, 10), min_diag=0.9, max_off_diag=0.1) is not None


@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 20), st.integers(2, 6)), elements=finite))
def test_to_classes_argmax_and_rounding(scores):
    assert list(to_classes(scores, argmax=True)) == list(np.argmax(scores, axis=1))
    assert list(to_classes(np.array([0.4, 1.6, 2.0]), argmax=False)) == [0, 2, 2]


@given(st.lists(st.integers(0, 5), min_size=1, max_size=100))
def test_imbalance_ratio_is_max_over_min_count(labels):
    counts = Counter(labels)
    ratio, most, least = imbalance(counts)
    assert ratio == max(counts.values()) / min(counts.values())
    assert counts[most] == max(counts.values()) and counts[least] == min(counts.values())


@given(batches, st.integers(0, 3))
def test_channel_sums_add_up_to_the_total(images, channel):
    assume(channel < images.ndim)
    sums, counts = channel_sums(images, channel)
    assert sums.shape == (images.shape[channel],)
    assert sums.sum() == pytest.approx(images.sum(), rel=1e-9, abs=1e-6)
    assert counts.sum() == images.size


@given(hnp.arrays(np.int64, st.integers(1, 100), elements=st.integers(0, 4)), st.integers(0, 4))
def test_token_percent(tokens, token):
    assert token_percent(tokens, token) == pytest.approx(100 * np.mean(tokens == token))


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20), st.integers(1, 5))
def test_top_share_is_a_share_and_needs_more_features_than_n(values, n):
    share = top_share(values, n)
    if len(values) <= n or sum(values) <= 0:
        assert share is None
    else:
        assert share is not None and 0 <= share <= 1 + 1e-12
        assert share >= n / len(values) - 1e-9  # the top n hold at least their fair part


@settings(max_examples=30)
@given(st.integers(0, 20))
def test_tree_depth_of_a_full_tree(k):
    assert depth_from_node_ids(np.arange(2 ** (k + 1) - 1)) == k
    assert depth_from_node_ids(np.array([], dtype=np.int64)) == 0
