"""ReplicaDivergence on multi-worker trials written by the hook (one Hook per worker, as each rank's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.rules import BUILTIN_RULES, invoke_rule
from sdk_ext.rules.builtin import ReplicaDivergence
from sdk_ext.rules.builtin.replica_divergence import replica_groups
from sdk_ext.trials import create_trial


def write_workers(root: Path, per_worker: list[list[dict[str, Any]]], *, include_workers: str = "all") -> Path:
    """``per_worker[w][step]`` = {name: value} saved by worker w at that step (weights collection)."""
    world = len(per_worker)
    hooks = [Hook(str(root), save_config=SaveConfig(save_interval=1), include_workers=include_workers,
                  rank=rank, world_size=world) for rank in range(world)]  # open together, as ranks run
    for step in range(len(per_worker[0])):
        for hook, steps in zip(hooks, per_worker):
            with hook.step(step):
                for name, value in steps[step].items():
                    hook.save_tensor(name, value, collections_to_write="weights" if "weight" in name else "biases")
    for hook in hooks:
        hook.close()
    return root


def evaluate(trial_dir: Path, **params: str) -> tuple[int | None, ReplicaDivergence]:
    rule = ReplicaDivergence(create_trial(str(trial_dir)), **params)
    try:
        invoke_rule(rule, raise_eval_cond=True, poll_interval=0.01)
    except RuleEvaluationConditionMet as fired:
        return fired.step, rule
    except NoMoreData:
        return None, rule
    raise AssertionError("NoMoreData expected at the end of training")


def steps_of(w: np.ndarray, n: int, drift: dict[int, float] | None = None) -> list[dict[str, Any]]:
    out = []
    for step in range(n):
        value = w * (1 - 0.1 * step) + (drift or {}).get(step, 0.0)
        out.append({"fc.weight": value.astype(np.float32), "fc.bias": np.arange(3, dtype=np.float32) * step})
    return out


W = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def test_is_a_builtin_rule_by_name() -> None:
    assert BUILTIN_RULES["ReplicaDivergence"] is ReplicaDivergence


def test_quiet_when_every_replica_holds_the_same_weights(tmp_path: Path) -> None:
    step, rule = evaluate(write_workers(tmp_path, [steps_of(W, 4)] * 3))
    assert step is None
    assert rule.compared == 8  # 2 tensors x 4 steps, each read from 3 workers
    assert rule.coverage_note() is None


def test_fires_naming_the_drifting_worker_and_tensor(tmp_path: Path) -> None:
    drifted = steps_of(W, 4, drift={2: 1e-3, 3: 2e-3})
    step, rule = evaluate(write_workers(tmp_path, [steps_of(W, 4), drifted, steps_of(W, 4)]))
    assert step == 2
    assert "worker_1's 'fc.weight' differs from worker_0's" in rule.issue
    assert "Workers agreeing: worker_0, worker_2; diverged: worker_1" in rule.issue
    assert "max |difference| 0.001" in rule.issue


def test_with_two_workers_worker_0_is_the_reference(tmp_path: Path) -> None:
    step, rule = evaluate(write_workers(tmp_path, [steps_of(W, 3, drift={1: 0.5}), steps_of(W, 3)]))
    assert step == 1
    assert "worker_1's" in rule.issue and "diverged: worker_1" in rule.issue


def test_tolerances_are_relative_to_the_tensor(tmp_path: Path) -> None:
    # a float32 rounding-sized difference is not drift; rtol=0 and atol=0 make it one
    tiny = steps_of(W, 2, drift={1: 1e-7})
    trial = write_workers(tmp_path, [steps_of(W, 2), tiny])
    assert evaluate(trial)[0] is None
    assert evaluate(trial, rtol="0", atol="0")[0] == 1


def test_selection_parameters(tmp_path: Path) -> None:
    # only the bias drifts: the default selection (weights, biases) sees it, a regex on weights does not
    good = steps_of(W, 2)
    bad = [dict(s) for s in good]
    bad[1]["fc.bias"] = bad[1]["fc.bias"] + 1
    trial = write_workers(tmp_path, [good, bad])
    assert evaluate(trial)[0] == 1
    assert evaluate(trial, collection_names="", tensor_regex=r"\.weight$")[0] is None


def test_one_worker_saving_is_reported_not_passed(tmp_path: Path) -> None:
    step, rule = evaluate(write_workers(tmp_path, [steps_of(W, 2)] * 2, include_workers="one"))
    assert step is None
    note = rule.coverage_note()
    assert note is not None and "saved by one worker only" in note and "include_workers='all'" in note


def test_shape_and_nan_differences() -> None:
    a = np.ones((2, 2))
    groups = replica_groups({"worker_0": a, "worker_1": np.ones((4,)), "worker_2": a}, rtol=1e-5, atol=1e-8)
    assert groups == [["worker_0", "worker_2"], ["worker_1"]]
    nan = np.full((2,), np.nan)
    assert replica_groups({"worker_0": nan, "worker_1": nan.copy()}, rtol=1e-5, atol=1e-8) == [["worker_0", "worker_1"]]
    assert len(replica_groups({"worker_0": nan, "worker_1": np.zeros(2)}, rtol=1e-5, atol=1e-8)) == 2


def test_a_two_against_two_split_keeps_worker_0s_side_as_reference() -> None:
    a, b = np.zeros(3), np.ones(3)
    groups = replica_groups({"worker_0": a, "worker_1": a, "worker_2": b, "worker_3": b}, rtol=0, atol=0)
    assert groups[0] == ["worker_0", "worker_1"]


@pytest.mark.parametrize("bad", [{"rtol": "-1"}, {"atol": "x"}, {"tensor_regex": "("}])
def test_bad_parameters_are_named(tmp_path: Path, bad: dict[str, str]) -> None:
    trial = write_workers(tmp_path, [steps_of(W, 1)] * 2)
    with pytest.raises(ValueError, match=next(iter(bad))):
        ReplicaDivergence(create_trial(str(trial)), **bad)
