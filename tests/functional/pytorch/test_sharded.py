"""Sharded models (FSDP2, FSDP1 with both use_orig_params settings, HSDP) in real gloo jobs on CPU.

One 2-process job trains examples/fsdp_train's small transformer under several wrappers in turn, each
into its own trial, with the same seed and the same per-rank data; DDP gives the reference values.
A 4-process HSDP job (2 replicas x 2 shards) shows ReplicaDivergence on a sharded model.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import NoMoreData, RuleEvaluationConditionMet
from sdk_ext.format.reductions import reduce as reduce_numpy
from sdk_ext.rules import invoke_rule
from sdk_ext.rules.builtin import ReplicaDivergence
from sdk_ext.trials import create_trial
from tests.functional.pytorch.launch import run_ranks
from tests.trial_dump import decode_value_json, dump_with_format, dump_with_smdebug, dump_with_trials

WORKER = Path(__file__).with_name("shard_worker.py")
STEPS = 3
ALL = ["weights", "biases", "gradients", "losses"]
OPS = {"reductions": ["min", "max", "mean", "std", "variance", "sum", "prod"], "abs_reductions": ["max", "mean"],
       "norms": ["l1", "l2"]}
GLOO = {"SDK_EXT_GATHER_TRANSPORT": "gloo"}  # every piece through the gloo group, as between hosts
WRAPPER_WORDS = ("_fsdp_wrapped_module", "_flat_param", "_orig_mod", "_checkpoint_wrapped_module", "FSDP")


def variant(name: str, wrap: str, hook: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    return {"name": name, "options": {"wrap": wrap, "steps": STEPS, **options},
            "hook": {"include_collections": ALL, **(hook or {})}}


TWO_RANKS = [
    variant("ddp", "ddp", {"include_workers": "all", "save_all": True}),
    variant("fsdp2", "fsdp2", {"save_all": True}),
    {**variant("fsdp2-gloo", "fsdp2", {"save_all": True}), "env": GLOO},
    {**variant("fsdp2-no-shm", "fsdp2", {"save_all": True}), "cannot_attach": 1},
    variant("losses-only", "fsdp2", {"include_collections": ["losses"]}),
    variant("fsdp1", "fsdp1"),
    variant("fsdp1-orig", "fsdp1-orig"),
    variant("fsdp2-all", "fsdp2", {"include_workers": "all"}),
    variant("fsdp2-reductions", "fsdp2", {"include_collections": ["weights", "gradients"], "reduction_config": OPS}),
    variant("fsdp2-shapes", "fsdp2", {"include_collections": ["weights", "gradients"],
                                      "reduction_config": {"save_shape": True}}),
    variant("ckpt-wrapper", "fsdp2", {"save_all": True}, checkpoint="wrapper"),
    variant("ckpt-function", "fsdp1-orig", {"save_all": True}, checkpoint="function"),
    variant("compiled", "fsdp2", {"save_all": True}, compile=True, compile_backend="aot_eager"),
    {**variant("interval", "fsdp2", {"save_interval": 2}, steps=5), "trace": True, "env": GLOO},
    {**variant("interval-shared", "fsdp2", {"save_interval": 2}, steps=5), "trace": True},
    variant("ddp-perturbed", "ddp", {"include_workers": "all"}, perturb_rank=1, perturb_step=1),
    {**variant("failing", "fsdp2", {"include_workers": "all"}, steps=4), "fail": {"rank": 0, "step": 1},
     "env": {"SDK_EXT_GATHER_TIMEOUT": "3"}},
    {"name": "dtensor", "hook": {"include_regex": ["Distributed_p"], "include_workers": "all"},
     "dtensor": ["Shard(0)", "Shard(1)", "Replicate()"]},
    {"name": "dtensor-gloo", "hook": {"include_regex": ["Distributed_p"], "include_workers": "all"},
     "dtensor": ["Shard(0)", "Shard(1)", "Replicate()"], "env": GLOO},
]


def run_job(root: Path, variants: list[dict[str, Any]], world: int) -> Path:
    spec = root / "spec.json"
    spec.write_text(json.dumps({"out": str(root), "variants": variants}))
    before = set(Path("/dev/shm").glob("sdk_ext-gather-*"))
    run_ranks(WORKER, [str(spec)], world=world, timeout=300)
    (root / "shm-left.json").write_text(json.dumps(sorted(map(str, set(Path("/dev/shm").glob("sdk_ext-gather-*"))
                                                                     - before))))
    return root


def shared(root: Path, name: str, world: int) -> list[list[list[int]]]:
    """Each rank's shard groups that shared memory in variant ``name``."""
    return [json.loads((root / f"{name}.shared.{rank}.json").read_text()) for rank in range(world)]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 2-process job (about 30 s on 2 loaded cores: torch.compile and 13 trainings)."""
    return run_job(tmp_path_factory.mktemp("sharded"), TWO_RANKS, world=2)


@pytest.fixture(scope="module")
def hsdp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 4-process HSDP job (2 replicas of 2 shards), healthy and with replica 1 perturbed."""
    return run_job(tmp_path_factory.mktemp("hsdp"), [
        variant("healthy", "hsdp", {"include_workers": "all", "include_collections": ["weights", "biases"]}),
        variant("perturbed", "hsdp", {"include_workers": "all", "include_collections": ["weights", "biases"]},
                perturb_rank=2, perturb_step=1),
        variant("one", "hsdp", {"include_collections": ["weights"]}, steps=1),
    ], world=4)


def parameters(dump: dict[str, Any]) -> list[str]:
    return [n for n in dump["tensors"] if n.startswith("TinyTransformer_") and not re.search(r"_(in|out)put_\d+$", n)]


def value(dump: dict[str, Any], name: str, step: int | str, worker: str = "worker_0") -> np.ndarray:
    return decode_value_json(dump["tensors"][name][str(step)][worker]["value"])


def ddp_name(name: str) -> str:
    """The DDP trial's name of a tensor of a trial of the unwrapped model (smdebug's DDP names)."""
    grad = name.startswith("gradient/")
    base = name.removeprefix("gradient/")
    if base.startswith("TinyTransformer_"):
        base = "DistributedDataParallel_module." + base.removeprefix("TinyTransformer_")
    elif base.startswith("TinyTransformer"):
        base = "DistributedDataParallel" + base.removeprefix("TinyTransformer")
    elif not base.startswith("CrossEntropyLoss"):
        base = "module." + base  # a submodule's inputs/outputs
    return ("gradient/" if grad else "") + base


def reference(ddp: dict[str, Any], name: str, step: str, worker: str = "worker_0") -> np.ndarray:
    """What a sharded run must hold: DDP's value, and for a gradient the mean of the workers' (DDP saves
    each rank's own gradient before the all-reduce; FSDP holds the reduced one)."""
    if name.startswith("gradient/"):
        return np.mean([value(ddp, ddp_name(name), step, w) for w in ddp["workers"]], axis=0)
    return value(ddp, ddp_name(name), step, worker)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fsdp2", "fsdp2-gloo", "fsdp1", "fsdp1-orig", "fsdp2-all", "ckpt-wrapper", "ckpt-function"])
def test_names_and_logical_values_match_ddp(jobs: Path, name: str) -> None:
    ddp, trial = dump_with_format(jobs / "ddp"), dump_with_format(jobs / name)
    params = parameters(trial)
    assert len(params) == 30  # every parameter, once, under the unwrapped model's name
    assert not [n for n in trial["tensors"] if any(w in n for w in WRAPPER_WORDS)]
    assert {f"gradient/{n}" for n in params} <= set(trial["tensors"])
    assert "CrossEntropyLoss_output_0" in trial["tensors"]
    compared = 0
    for tensor, steps in trial["tensors"].items():
        if ddp_name(tensor) not in ddp["tensors"]:
            assert tensor in ("TinyTransformer_input_0", "TinyTransformer_output_0"), tensor  # DDP's root differs
            continue
        assert sorted(steps) == ["0", "1", "2"], tensor
        for step, workers in steps.items():
            for worker in workers:
                if not tensor.startswith(("TinyTransformer_", "gradient/")) and worker != "worker_0":
                    continue  # a rank's own activations: compared on worker_0
                mine, theirs = value(trial, tensor, step, worker), reference(ddp, tensor, step)
                assert mine.shape == theirs.shape, (tensor, step)
                np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-6, err_msg=f"{tensor} step {step}")
                compared += 1
    assert compared >= 60 * STEPS


@pytest.mark.slow
def test_include_workers(jobs: Path) -> None:
    one, every = dump_with_format(jobs / "fsdp2"), dump_with_format(jobs / "fsdp2-all")
    meta = json.loads((jobs / "fsdp2-all" / "collections/000000000/worker_1_collections.json").read_text())["_meta"]
    assert meta == {"num_workers": 2}
    # "one": rank 0 writes the logical tensors and its own activations; "all": every rank writes the
    # logical tensors (as each DDP worker writes its weights) and its own loss
    assert one["workers"] == ["worker_0"] and every["workers"] == ["worker_0", "worker_1"]
    name = "TinyTransformer_head.weight"  # 31 rows: sharded 16 + 15
    for step in ("0", "1", "2"):
        assert value(every, name, step, "worker_0").shape == (31, 16)
        np.testing.assert_array_equal(value(every, name, step, "worker_0"), value(every, name, step, "worker_1"))
        np.testing.assert_array_equal(value(every, name, step, "worker_0"), value(one, name, step))
    loss = "CrossEntropyLoss_output_0"
    assert not np.array_equal(value(every, loss, 0, "worker_0"), value(every, loss, 0, "worker_1"))  # own data


@pytest.mark.slow
def test_reductions_are_over_the_whole_tensor(jobs: Path) -> None:
    sharded, raw = dump_with_format(jobs / "fsdp2-reductions"), dump_with_format(jobs / "ddp")
    checked = 0
    for tensor, steps in sharded["tensors"].items():
        if not tensor.startswith(("TinyTransformer_", "gradient/")):
            continue
        for step, workers in steps.items():
            record = workers["worker_0"]
            assert "list" not in record["value"] and "b64" not in record["value"]  # only reductions were saved
            assert len(record["reductions"]) == 11
            whole = reference(raw, tensor, step)
            for key, red in record["reductions"].items():
                is_abs, op = key.startswith("abs_"), key.removeprefix("abs_")
                mine = decode_value_json(red)
                assert mine.dtype == np.float32
                # against the whole weight of the DDP run (for a gradient: the reduced one), in float64
                expected = reduce_numpy(whole.astype(np.float64), op, abs=is_abs)
                np.testing.assert_allclose(mine, expected, rtol=2e-6, atol=1e-7 if op != "prod" else 1e-30,
                                           err_msg=f"{tensor} {key} step {step}")
                checked += 1
    assert checked == (15 + 30) * STEPS * 11  # the weights (not the biases) and every gradient


@pytest.mark.slow
def test_shapes_alone_are_the_whole_tensors_shapes(jobs: Path) -> None:
    # save_shape without values: no piece moves, rank 0 writes each logical tensor's shape, also once the
    # hook's gloo group is closed (every shard group shares memory here)
    assert [json.loads((jobs / f"fsdp2-shapes.gloo.{rank}.json").read_text()) for rank in (0, 1)] == [False, False]
    shapes, whole = create_trial(str(jobs / "fsdp2-shapes")), create_trial(str(jobs / "ddp"))
    names = shapes.tensor_names()
    assert any(n.startswith("gradient/") for n in names) and any(n.startswith("TinyTransformer_") for n in names)
    assert shapes.steps() == list(range(STEPS))
    for name in names:
        for step in range(STEPS):
            assert shapes.tensor(name).shape(step) == whole.tensor(ddp_name(name)).value(step).shape, (name, step)


@pytest.mark.slow
def test_no_communication_on_a_step_that_saves_nothing(jobs: Path) -> None:
    trial = dump_with_format(jobs / "interval")
    assert trial["steps"]["GLOBAL"] == [0, 2, 4]
    sent = [json.loads((jobs / f"interval.trace.{rank}.json").read_text()) for rank in (0, 1)]
    assert sent[0] == []  # include_workers="one": rank 0 only receives
    steps = sorted({s for s, _, _ in sent[1]})
    assert steps == [0, 2, 4]  # weights at the start of the step, gradients at the end of its backward
    # a saved step moves at most the saved tensors' bytes, once: rank 1 sends its own pieces to rank 0
    logical = sum(math.prod(v.shape) * 4 for n, v in ((n, value(trial, n, 0)) for n in trial["tensors"])
                  if n.startswith(("TinyTransformer_", "gradient/")))
    for step in steps:
        nbytes = sum(b for s, peer, b in sent[1] if s == step)
        assert all(peer == 0 for s, peer, _ in sent[1])
        assert logical * 0.4 < nbytes <= logical // 2 + 16 * 61 * 2, (step, nbytes, logical)


@pytest.mark.slow
def test_ranks_of_one_host_share_memory_and_nothing_crosses_gloo(jobs: Path) -> None:
    # the default transport: the two ranks (one host) put each tensor together in shared memory; a
    # named pipe carries one presence byte per tensor and round; the values are the gloo run's
    assert shared(jobs, "interval-shared", 2) == [[[0, 1]], [[0, 1]]]
    assert shared(jobs, "interval", 2) == [[], []]  # SDK_EXT_GATHER_TRANSPORT=gloo
    # once every piece of the job goes through shared memory, the hook's gloo group (and its threads)
    # is closed on every rank; with gloo it stays
    gloo_open = {name: [json.loads((jobs / f"{name}.gloo.{rank}.json").read_text()) for rank in (0, 1)]
                 for name in ("interval-shared", "fsdp2-all", "interval")}
    assert gloo_open == {"interval-shared": [False, False], "fsdp2-all": [False, False], "interval": [True, True]}
    assert json.loads((jobs / "interval-shared.trace.1.json").read_text()) == []  # no gloo send at all
    told = json.loads((jobs / "interval-shared.told.1.json").read_text())
    assert sorted({s for s, _, _ in told}) == [0, 2, 4]  # still nothing on a step that saves nothing
    assert {writer for _, writer, _ in told} == {0}
    for step in (0, 2, 4):
        assert sum(b for s, _, b in told if s == step) <= 61 * 2, step
    through_shm, through_gloo = dump_with_format(jobs / "interval-shared"), dump_with_format(jobs / "interval")
    assert through_shm["tensors"].keys() == through_gloo["tensors"].keys()
    for name, steps in through_gloo["tensors"].items():
        for step in steps:
            np.testing.assert_array_equal(value(through_shm, name, step), value(through_gloo, name, step), name)
    assert json.loads((jobs / "shm-left.json").read_text()) == []  # every arena was unlinked at setup


@pytest.mark.slow
def test_a_configuration_that_saves_no_sharded_tensor_reserves_no_shared_memory(jobs: Path) -> None:
    assert shared(jobs, "losses-only", 2) == [[], []]
    assert set(dump_with_format(jobs / "losses-only")["tensors"]) == {"CrossEntropyLoss_output_0"}


@pytest.mark.slow
def test_a_group_whose_ranks_cannot_all_map_the_arena_uses_gloo_on_every_rank(jobs: Path) -> None:
    # rank 1 cannot map what rank 0 made (as on another host): both ranks send through gloo, and
    # the trial holds what the shared-memory run holds
    assert shared(jobs, "fsdp2-no-shm", 2) == [[], []]
    assert shared(jobs, "fsdp2", 2) == [[[0, 1]], [[0, 1]]]
    fallback, reference_run = dump_with_format(jobs / "fsdp2-no-shm"), dump_with_format(jobs / "fsdp2")
    assert fallback["tensors"].keys() == reference_run["tensors"].keys()
    for name, steps in reference_run["tensors"].items():
        for step in steps:
            np.testing.assert_array_equal(value(fallback, name, step), value(reference_run, name, step), name)


@pytest.mark.slow
def test_torch_compile_keeps_parameters_gradients_and_model_outputs(jobs: Path) -> None:
    trial = dump_with_format(jobs / "compiled")
    names = set(trial["tensors"])
    assert len(parameters(trial)) == 30
    assert len([n for n in names if n.startswith("gradient/TinyTransformer_")]) == 30
    assert {"TinyTransformer_output_0", "CrossEntropyLoss_output_0"} <= names
    assert not [n for n in names if n.startswith(("blocks.", "embed_", "head_"))]  # submodules inside the graph


@pytest.mark.slow
def test_activation_checkpointing_saves_each_forward_once(jobs: Path) -> None:
    for name in ("ckpt-wrapper", "ckpt-function"):
        trial = dump_with_format(jobs / name)
        assert "blocks.0.mlp.0_output_0" in trial["tensors"]
        assert not [n for n in trial["tensors"] if n.endswith("_output_1") and n.startswith("blocks.")], name


@pytest.mark.slow
def test_a_failing_rank_neither_hangs_nor_stops_training(jobs: Path) -> None:
    # rank 0's disk fills at step 1: its hook disables itself; rank 1 waits for its pieces for at most
    # SDK_EXT_GATHER_TIMEOUT (3 s) and disables its own; both train every step
    failures = [json.loads((jobs / f"failing.failure.{rank}.json").read_text()) for rank in (0, 1)]
    assert failures[0].startswith("OSError") and "No space left" in failures[0]
    assert failures[1].startswith("GatherError") and "rank 0" in failures[1]
    assert [len(json.loads((jobs / f"failing.losses.{r}.json").read_text())) for r in (0, 1)] == [4, 4]
    assert dump_with_format(jobs / "failing")["steps"]["GLOBAL"][0] == 0  # step 0 is intact


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dtensor", "dtensor-gloo"])
def test_dtensor_blocks_along_any_dimension_are_put_together(jobs: Path, name: str) -> None:
    trial = dump_with_format(jobs / name)
    for i in range(3):  # rows 3 + 2, columns 4 + 3, replicated: each worker holds the whole tensor
        expected = np.arange(35.0, dtype=np.float32).reshape(5, 7) + 100 * i
        for worker in ("worker_0", "worker_1"):
            np.testing.assert_array_equal(value(trial, f"Distributed_p{i}", 0, worker), expected)


def replica_rule(trial_dir: Path) -> tuple[int | None, ReplicaDivergence]:
    rule = ReplicaDivergence(create_trial(str(trial_dir)))
    try:
        invoke_rule(rule, raise_eval_cond=True, poll_interval=0.01)
    except RuleEvaluationConditionMet as fired:
        return fired.step, rule
    except NoMoreData:
        return None, rule
    raise AssertionError("NoMoreData expected")


@pytest.mark.slow
def test_replica_divergence_on_ddp(jobs: Path) -> None:
    assert replica_rule(jobs / "ddp")[0] is None
    step, rule = replica_rule(jobs / "ddp-perturbed")
    assert step == 2  # rank 1 nudged its first weight after its update at step 1
    assert "worker_1's 'DistributedDataParallel_module.embed.weight' differs from worker_0's" in rule.issue


@pytest.mark.slow
def test_replica_divergence_on_hsdp(hsdp: Path) -> None:
    healthy = dump_with_format(hsdp / "healthy")
    assert healthy["workers"] == ["worker_0", "worker_1", "worker_2", "worker_3"]
    assert shared(hsdp, "healthy", 4) == [[[0, 1]], [[0, 1]], [[2, 3]], [[2, 3]]]  # an arena per replica
    # include_workers="one": rank 0 writes its replica's tensors; the other replica needs no arena
    assert shared(hsdp, "one", 4) == [[[0, 1]], [[0, 1]], [], []]
    assert dump_with_format(hsdp / "one")["workers"] == ["worker_0"]
    step, rule = replica_rule(hsdp / "healthy")
    assert step is None and rule.compared > 0
    step, rule = replica_rule(hsdp / "perturbed")
    assert step == 2  # rank 2 (replica 1) nudged its shard of the first weight
    assert "'TinyTransformer_embed.weight' differs from worker_0's" in rule.issue
    assert "Workers agreeing: worker_0, worker_1; diverged: worker_2, worker_3" in rule.issue


@pytest.mark.slow
@pytest.mark.smdebug
def test_real_smdebug_reads_the_stitched_tensors(jobs: Path, smdebug_python: Path, tmp_path: Path) -> None:
    for name in ("fsdp2", "fsdp2-all", "fsdp1"):
        theirs, ours = dump_with_smdebug(smdebug_python, jobs / name, tmp_path), dump_with_format(jobs / name)
        assert theirs["workers"] == ours["workers"]
        assert theirs["tensor_names"] == ours["tensor_names"]
        assert theirs["tensors"] == ours["tensors"]


@pytest.mark.slow
def test_the_projects_reader_reads_them(jobs: Path) -> None:
    for name in ("fsdp2-all", "fsdp2-reductions"):
        mine, ours = dump_with_trials(jobs / name), dump_with_format(jobs / name)
        for key in ("tensor_names", "workers", "steps", "tensors"):
            assert mine[key] == ours[key], (name, key)
