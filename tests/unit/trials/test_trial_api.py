"""The Trial / Tensor API over an in-memory trial: queries, filters, errors, options."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from sdk_ext.exceptions import (
    ConfigError,
    InvalidWorker,
    NoMoreData,
    ShapeUnavailableForStep,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from sdk_ext.format.collection_file import CollectionSpec
from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.storage import InMemoryStorage
from sdk_ext.trials import Collection, Trial, TrialOptions, create_trial, no_refresh
from tests.trial_builder import FakeClock, TrialBuilder

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL


def weights(step: int) -> np.ndarray:
    return np.arange(12, dtype=np.float32).reshape(3, 4) * (step + 1) - 5


@pytest.fixture
def storage() -> InMemoryStorage:
    """TRAIN steps 0, 2, 4 (global 0, 2, 4), EVAL 0, 1 (global 5, 6), a GLOBAL step 8; ended."""
    s = InMemoryStorage()
    b = TrialBuilder(s)
    b.collections(
        specs={
            "weights": CollectionSpec(name="weights", include_regex=("weight",)),
            "losses": CollectionSpec(name="losses", tensor_names=("loss",)),
        }
    )
    for step in (0, 2, 4):
        b.step(step, mode=TRAIN, mode_step=step,
               tensors={"fc/weight": weights(step), "loss": np.full((), 1 / (step + 1), np.float32)},
               reductions={("fc/weight", "mean", False): np.array([weights(step).mean()]),
                           ("grad", "l2", True): np.array([float(step)])},
               shapes={"fc/weight": (3, 4)})
    for mode_step, step in enumerate((5, 6)):
        b.step(step, mode=EVAL, mode_step=mode_step, tensors={"loss": np.full((), step, np.float32),
                                                              "eval/acc": np.array([0.5])})
    b.step(8, tensors={"final": np.array([8])})
    b.end()
    return s


def test_names_steps_modes_and_maps(storage):
    trial = create_trial(storage, timeout=0)
    assert trial.tensor_names() == ["eval/acc", "fc/weight", "final", "grad", "loss"]
    assert trial.tensor_names(mode=TRAIN) == ["fc/weight", "grad", "loss"]
    assert trial.tensor_names(mode=EVAL) == ["eval/acc", "loss"]
    assert trial.tensor_names(mode="predict") == []
    assert trial.tensor_names(step=5) == ["eval/acc", "loss"]
    assert trial.tensor_names(step=1, mode=EVAL) == ["eval/acc", "loss"]
    assert trial.tensor_names(step=3, mode=EVAL) == []
    assert trial.tensor_names(regex="^fc/") == ["fc/weight"]
    assert trial.tensor_names(regex=[["los"], "acc"]) == ["eval/acc", "loss"]
    assert trial.tensor_names(collection="weights") == ["fc/weight"]
    assert trial.tensor_names(collection=trial.collection("losses"), mode=EVAL) == ["loss"]
    assert trial.tensor_names(collection="nope") == []
    with pytest.raises(ConfigError, match="either regex or collection"):
        trial.tensor_names(regex="a", collection="weights")
    assert trial.steps() == [0, 2, 4, 5, 6, 8]
    assert trial.steps(TRAIN) == [0, 2, 4] and trial.steps(EVAL) == [0, 1] and trial.steps(ModeKeys.PREDICT) == []
    assert trial.modes() == [TRAIN, EVAL]
    assert trial.mode_modestep(6) == (EVAL, 1) and trial.mode_modestep(7) == (None, None)
    assert trial.mode(8) is GLOBAL and trial.mode_step(8) == 8
    assert trial.global_step(EVAL, 1) == 6 and trial.global_step(EVAL, 9) is None and trial.global_step(GLOBAL, 3) == 3
    assert trial.workers() == ["worker_0"] and trial.num_workers == 1
    assert set(trial.collections()) == {"weights", "losses"}
    assert isinstance(trial.collection("weights"), Collection)
    assert trial.collection("losses").tensor_names == {"loss"} and trial.collection("weights").include_regex == ["weight"]
    assert trial.name == "" or isinstance(trial.name, str)


def test_tensor_values_shapes_reductions_and_steps(storage):
    trial = create_trial(storage, timeout=0, name="t")
    w = trial.tensor("fc/weight")
    assert w.steps() == [0, 2, 4] and w.steps(TRAIN) == [0, 2, 4] and w.steps(EVAL) == []
    assert np.array_equal(w.value(2), weights(2)) and w.value(2).dtype == np.float32
    assert np.array_equal(w.value(4, mode=TRAIN), weights(4))
    assert w.shape(0) == (3, 4)
    assert trial.tensor("loss").shape(5) == ()
    assert list(w.values()) == [0, 2, 4]
    assert all(np.array_equal(v, weights(s)) for s, v in w.values(TRAIN).items())
    assert w.reduction_values(2) == {("mean", False): pytest.approx(np.array([weights(2).mean()]))}
    assert w.reduction_value(2, "mean") == pytest.approx(weights(2).mean())
    assert w.reduction_value(2, "max", abs=True) == np.abs(weights(2)).max()
    assert w.reduction_value(2, "l1") == np.abs(weights(2)).sum()  # element-wise, as the hooks store it
    assert w.reduction_value(2, "l2_norm") == pytest.approx(np.linalg.norm(weights(2).reshape(-1)))
    with pytest.raises(ConfigError, match="unknown reduction 'median'"):
        w.reduction_value(2, "median")
    grad = trial.tensor("grad")  # reductions only
    assert grad.reduction_value(4, "l2", abs=True) == np.array([4.0])
    with pytest.raises(TensorUnavailableForStep, match="has reductions"):
        grad.value(4)
    with pytest.raises(TensorUnavailableForStep):
        grad.reduction_value(4, "min")
    with pytest.raises(ShapeUnavailableForStep):
        grad.shape(4)
    assert w.prev_steps(3) == [0, 2] and w.prev_steps(4, n=2) == [2, 4] and w.prev_steps(4, 1) == [4]
    assert w.workers(2) == ["worker_0"]
    with pytest.raises(InvalidWorker, match="worker_9.*worker_0"):
        w.value(2, worker="worker_9")
    with pytest.raises(TensorUnavailableForStep):
        w.workers(3)


def test_missing_things_raise_smdebugs_exceptions(storage):
    trial = create_trial(storage, timeout=0)
    with pytest.raises(TensorUnavailable):
        trial.tensor("nope")
    assert not trial.has_tensor("nope") and trial.has_tensor("loss")
    loss = trial.tensor("loss")
    with pytest.raises(StepUnavailable):  # skipped step
        loss.value(1)
    with pytest.raises(TensorUnavailableForStep):  # step exists, tensor not in it
        loss.value(8)
    with pytest.raises(StepUnavailable):  # beyond the end of an ended trial
        loss.value(100)
    assert trial.has_passed_step(1) is StepState.UNAVAILABLE
    assert trial.has_passed_step(8) is StepState.AVAILABLE
    assert trial.has_passed_step(100) is StepState.UNAVAILABLE
    assert trial.has_passed_step(1, EVAL) is StepState.AVAILABLE
    trial.wait_for_steps([0, 5, 8])
    with pytest.raises(StepUnavailable):
        trial.wait_for_steps([3])
    with pytest.raises(NoMoreData) as err:
        trial.wait_for_steps([9])
    assert err.value.last_step == 8


def test_range_steps_hides_steps_outside_and_is_validated(storage):
    trial = create_trial(storage, range_steps=(2, 6), timeout=0)
    assert trial.steps() == [2, 4, 5]
    assert trial.tensor("fc/weight").steps() == [2, 4]
    assert create_trial(storage, range_steps=(None, 3), timeout=0).steps() == [0, 2]
    for bad in ((5, 5), (-1, None), (1.5, None), (1, 2, 3)):
        with pytest.raises(ConfigError, match="range_steps"):
            create_trial(storage, range_steps=bad, timeout=0)


def test_cache_returns_the_same_array_and_index_mode_false_is_refused(storage):
    trial = create_trial(storage, cache=True, timeout=0)
    w = trial.tensor("fc/weight")
    assert w.value(2) is w.value(2)
    assert create_trial(storage, timeout=0).tensor("fc/weight").value(2) is not w.value(2)
    with pytest.raises(ConfigError, match="index_mode"):
        create_trial(storage, index_mode=False)


def test_constructor_touches_nothing_and_first_query_loads():
    class Exploding(InMemoryStorage):
        touched = False

        def list(self, prefix, *, start_after=""):
            Exploding.touched = True
            return super().list(prefix, start_after=start_after)

    s = Exploding()
    TrialBuilder(s).collections()
    trial = Trial(s, options=TrialOptions(collections_timeout=0))
    assert not Exploding.touched
    assert trial.steps() == [] and Exploding.touched


def test_options_are_validated_and_read_from_smdebug_env_only_on_request():
    with pytest.raises(ConfigError, match="2 problems"):
        TrialOptions(poll_interval=0, collections_timeout=-1)
    opts = TrialOptions.from_env(
        {"SMDEBUG_TRAINING_END_DELAY_REFRESH": "3", "SMDEBUG_MISSING_EVENT_FILE_RETRY_LIMIT": "5",
         "SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW": "10", "SDK_EXT_COLLECTIONS_TIMEOUT": "60"},
        poll_interval=0.5,
    )
    assert (opts.training_end_delay, opts.event_file_timeout, opts.incomplete_step_window) == (3.0, 10.0, 10)
    assert (opts.collections_timeout, opts.poll_interval) == (60.0, 0.5)
    with pytest.raises(ConfigError, match="SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW='x'"):
        TrialOptions.from_env({"SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW": "x"})


def test_no_refresh_keeps_the_trial_as_read_until_the_block_ends():
    s = InMemoryStorage()
    b = TrialBuilder(s)
    b.collections()
    b.step(0, tensors={"x": np.ones(2)})
    clock = FakeClock()
    trial = create_trial(s, options=TrialOptions(clock=clock), timeout=0)
    b.step(1, tensors={"x": np.ones(2)})
    with no_refresh([trial]):
        assert trial.steps() == [0]
        assert trial.tensor("x").steps() == [0]
    assert trial.steps() == [0, 1]
    b.step(2, tensors={"x": np.ones(2)})
    with no_refresh(trial):
        trial.wait_for_steps([2])  # waiting always refreshes (and leaves no_refresh in force)
        assert not trial.dynamic_refresh
    assert trial.dynamic_refresh and clock.sleeps == []


def test_reading_step_after_step_fetches_event_files_in_batches():
    class Counting(InMemoryStorage):
        calls: ClassVar[list[int]] = []  # files per storage call
        read_into = None  # as on S3: no reading into memory, round trips are what count

        def read(self, key, *, start=0, length=None):
            if key.startswith("events/"):
                Counting.calls.append(1)
            return super().read(key, start=start, length=length)

        def read_many(self, requests):
            if requests and requests[0].key.startswith("events/"):
                Counting.calls.append(len(requests))
            return [InMemoryStorage.read(self, r.key, start=r.start, length=r.length) for r in requests]

    s = Counting()
    b = TrialBuilder(s)
    b.collections()
    for step in range(200):
        b.step(step, tensors={"a": np.full(3, step), "b": np.full(2, -step)})
    b.end()
    trial = create_trial(s, timeout=0)
    for name in ("a", "b"):
        t = trial.tensor(name)
        assert [int(t.value(step)[0]) for step in t.steps()] == [(1 if name == "a" else -1) * s for s in range(200)]
    assert sum(Counting.calls) == 200 and len(Counting.calls) <= 6  # every file once, in few round trips
    Counting.calls.clear()
    assert trial.tensor("a").value(57).tolist() == [57] * 3 and Counting.calls == []  # cached
    fresh = create_trial(s, timeout=0)
    fresh.tensor("a").value(57), fresh.tensor("b").value(120)
    assert Counting.calls == [1, 1]  # lone reads fetch just their own file
