"""A step plan, worked out a block of steps at a time, locates a tensor's records over any slice of its
steps exactly as looking each step up does (sdk_ext.trials.read.step_plan)."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage
from sdk_ext.trials import TrialOptions, create_trial
from sdk_ext.trials.index.step_files import Location, StepFile
from sdk_ext.trials.index.trial_index import TrialIndex
from sdk_ext.trials.read import step_plan as plan_module
from sdk_ext.trials.read.step_plan import StepPlan
from tests.trial_builder import TrialBuilder
from tests.unit.trials.test_bulk_values import EDGES

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL


def holder(index: TrialIndex, step: int, mode: ModeKeys, worker: str | None, name: str) -> tuple[StepFile, Location] | None:
    """The step file and record of ``name`` at ``step`` as ``Tensor.value`` finds them; None where it cannot."""
    found = index.files_at(step, mode)
    candidates = [f for f in (found[1] if found else []) if worker is None or f.worker == worker]
    sf = next((f for f in candidates if name in f.names), None)
    if sf is None or sf.event_key is None or name not in sf.raw:
        return None
    return sf, sf.raw[name]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_locate_over_any_slice_equals_looking_up_each_step(data: st.DataObject) -> None:
    workers = [f"worker_{i}" for i in range(data.draw(st.integers(1, 3), label="workers"))]
    steps = sorted(data.draw(st.sets(st.one_of(st.sampled_from(EDGES), st.integers(0, 20000)), min_size=1, max_size=40)))
    names = ["a", "b", "c"]
    absent = data.draw(st.sets(st.tuples(st.integers(0, len(steps) - 1), st.sampled_from(workers),
                                         st.sampled_from(names)), max_size=8), label="absent")
    skipped = data.draw(st.sets(st.tuples(st.integers(0, len(steps) - 1), st.sampled_from(workers)), max_size=3),
                        label="skipped")  # the worker wrote no file at that step
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections(workers)
    mode_steps = {TRAIN: 0, EVAL: 0}
    for k, step in enumerate(steps):
        mode = EVAL if k % 3 == 2 else TRAIN
        for worker in workers:
            if (k, worker) not in skipped:
                saved = {n: np.full(k % 3 + 1, step, np.float32) for n in names if (k, worker, n) not in absent}
                builder.step(step, worker, mode=mode, mode_step=mode_steps[mode], tensors=saved)
        mode_steps[mode] += 1
    builder.end()
    trial = create_trial(storage, options=TrialOptions(training_end_delay=0), timeout=0)
    index = trial._index
    block = data.draw(st.integers(1, 9), label="block")
    cuts = data.draw(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=4), label="slices")
    with mock.patch.object(plan_module, "BLOCK", block):
        for name in names:
            for mode in (GLOBAL, TRAIN, EVAL):
                for walk in (index.tensor_steps(name, mode)[0], index.mode_steps(mode)):
                    n = len(walk)
                    for who in (None, *workers):
                        step_plan = StepPlan(index, walk, mode, who)
                        # blocks are worked out in whatever order the slices need them
                        for lo, hi in [*((min(a, n), min(b, n)) for a, b in cuts), (0, n)]:
                            check_slice(index, step_plan, name, mode, who, lo, hi)
                        assert len(step_plan.chunk) >= len(step_plan.files)  # a cache place for every file


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_plan_across_workers_locates_each_worker_at_each_step_as_looking_it_up_does(data: st.DataObject) -> None:
    workers = [f"worker_{i}" for i in range(data.draw(st.integers(2, 4), label="workers"))]
    steps = sorted(data.draw(st.sets(st.integers(0, 5000), min_size=1, max_size=25), label="steps"))
    absent = data.draw(st.sets(st.tuples(st.integers(0, len(steps) - 1), st.sampled_from(workers)), max_size=4),
                       label="absent")  # the worker did not save "a" at that step
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections(workers)
    for k, step in enumerate(steps):
        mode = EVAL if k % 4 == 3 else TRAIN
        for worker in workers:
            saved = {"b": np.full(2, step, np.float32)}
            if (k, worker) not in absent:
                saved["a"] = np.full(k % 3 + 1, step, np.float32)
            builder.step(step, worker, mode=mode, mode_step=k, tensors=saved)
    builder.end()
    index = create_trial(storage, options=TrialOptions(training_end_delay=0), timeout=0)._index
    order = data.draw(st.permutations(workers), label="order")
    block = data.draw(st.integers(1, 9), label="block")
    with mock.patch.object(plan_module, "BLOCK", block):
        for name in ("a", "b"):
            for mode in (GLOBAL, TRAIN, EVAL):
                walk = index.mode_steps(mode)
                step_plan = StepPlan(index, walk, mode, None, across=order)
                n = len(walk) * len(order)
                assert step_plan.positions == n
                cuts = data.draw(st.lists(st.tuples(st.integers(0, n), st.integers(0, n)), max_size=3), label="cuts")
                for lo, hi in [*cuts, (0, n)]:
                    got = step_plan.locate(name, lo, hi)
                    expected = [holder(index, walk[p // len(order)], mode, order[p % len(order)], name)
                                for p in range(lo, max(lo, hi))]
                    if any(e is None for e in expected):
                        assert got is None, (name, mode, lo, hi)
                        continue
                    assert got is not None, (name, mode, lo, hi)
                    numbers, starts, lengths = got
                    assert [step_plan.files[k] for k in numbers.tolist()] == [e[0] for e in expected if e]
                    assert starts.tolist() == [e[1][0] for e in expected if e]
                    assert lengths.tolist() == [e[1][1] for e in expected if e]


def check_slice(
    index: TrialIndex, step_plan: StepPlan, name: str, mode: ModeKeys, worker: str | None, lo: int, hi: int
) -> None:
    got = step_plan.locate(name, lo, hi)
    expected = [holder(index, s, mode, worker, name) for s in step_plan.steps[lo:hi]]
    where = (name, mode, worker, lo, hi)
    if any(e is None for e in expected):
        assert got is None, where
        return
    assert got is not None, where
    numbers, starts, lengths = got
    assert [step_plan.files[k] for k in numbers.tolist()] == [e[0] for e in expected if e], where
    assert starts.tolist() == [e[1][0] for e in expected if e], where
    assert lengths.tolist() == [e[1][1] for e in expected if e], where


def test_a_plan_works_out_only_the_blocks_a_slice_needs() -> None:
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections()
    for step in range(100):
        builder.step(step, tensors={"x": np.full(2, step, np.float32)})
    builder.end()
    trial = create_trial(storage, timeout=0)
    with mock.patch.object(plan_module, "BLOCK", 10):
        step_plan = StepPlan(trial._index, list(range(100)), GLOBAL, None)
        got = step_plan.locate("x", 55, 62)
        assert got is not None
        assert [step_plan.files[k].step for k in got[0].tolist()] == list(range(55, 62))
        assert sorted(f.step for f in step_plan.files) == list(range(50, 70))  # blocks 5 and 6 only
        assert len(step_plan.event_keys()) == 100  # every block, for a slab over every file



def test_a_slice_inside_a_group_of_other_names_is_located() -> None:
    # steps 9 and 11 lack "a": their group (other names) spans step 10, which has it; a slice of step 10
    # alone must not be refused for the group around it
    storage = InMemoryStorage()
    builder = TrialBuilder(storage)
    builder.collections()
    for step in range(8, 12):
        tensors = {"b": np.full(2, step, np.float32)}
        if step in (8, 10):
            tensors["a"] = np.full(3, step, np.float32)
        builder.step(step, tensors=tensors)
    builder.end()
    index = create_trial(storage, timeout=0)._index
    with mock.patch.object(plan_module, "BLOCK", 4):
        step_plan = StepPlan(index, [8, 9, 10, 11], GLOBAL, None)
        got = step_plan.locate("a", 2, 3)
        assert got is not None and [step_plan.files[k].step for k in got[0].tolist()] == [10]
        assert step_plan.locate("a", 1, 3) is None  # step 9 has no "a": the step-by-step path says so
