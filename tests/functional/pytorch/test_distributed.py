"""torch.distributed: every rank writes worker_{rank} (include_workers="all") or only rank 0 ("one")."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.trial_dump import decode_value_json, dump_with_format, dump_with_smdebug, dump_with_trials

SCRIPT = Path(__file__).with_name("dist_train.py")


def run_job(out: Path, include_workers: str, env: dict[str, str]) -> None:
    store = str(out.parent / f"{out.name}.store")
    procs = [
        subprocess.Popen([sys.executable, str(SCRIPT), str(out), str(rank), "2", store, include_workers], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for rank in (0, 1)
    ]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    report = "\n".join(f"--- rank {rank}: exit {p.returncode}\n{text[-3000:]}" for rank, (p, text) in enumerate(zip(procs, outputs)))
    assert all(p.returncode == 0 for p in procs), report


@pytest.fixture(scope="module")
def all_workers_trial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 2-process gloo DDP job (about 10 s: two torch imports on two cores)."""
    import os

    from tests.conftest import REPO

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path_factory.mktemp("dist") / "all"
    run_job(out, "all", env)
    return out


@pytest.mark.slow
def test_every_rank_writes_its_own_worker_files(all_workers_trial: Path) -> None:
    dump = dump_with_format(all_workers_trial)
    assert dump["workers"] == ["worker_0", "worker_1"]
    assert dump["steps"]["GLOBAL"] == [0, 1, 2]
    for worker in ("worker_0", "worker_1"):
        meta = json.loads((all_workers_trial / f"collections/000000000/{worker}_collections.json").read_text())["_meta"]
        assert meta == {"num_workers": 2}
    name = "DistributedDataParallel_module.fc1.weight"
    for step in ("0", "1", "2"):
        per_worker = dump["tensors"][name][step]
        # DDP keeps the weights equal on every rank ...
        assert np.array_equal(decode_value_json(per_worker["worker_0"]["value"]), decode_value_json(per_worker["worker_1"]["value"]))
        grads = dump["tensors"]["gradient/" + name][step]
        # ... while each rank's gradient is its own (before the all-reduce)
        assert not np.array_equal(decode_value_json(grads["worker_0"]["value"]), decode_value_json(grads["worker_1"]["value"]))


@pytest.mark.slow
@pytest.mark.smdebug
def test_smdebug_reads_the_two_worker_trial(all_workers_trial: Path, smdebug_python: Path, tmp_path: Path) -> None:
    theirs = dump_with_smdebug(smdebug_python, all_workers_trial, tmp_path)
    ours = dump_with_format(all_workers_trial)
    assert theirs["workers"] == ["worker_0", "worker_1"]
    assert theirs["steps"] == ours["steps"]
    assert theirs["tensor_names"] == ours["tensor_names"]
    assert theirs["tensors"] == ours["tensors"]


@pytest.mark.slow
def test_the_projects_reader_reads_the_two_worker_trial(all_workers_trial: Path) -> None:
    mine, ours = dump_with_trials(all_workers_trial), dump_with_format(all_workers_trial)
    assert mine["workers"] == ["worker_0", "worker_1"]
    for key in ("tensor_names", "steps", "mode_of_step", "tensors"):
        assert mine[key] == ours[key], key


@pytest.mark.parametrize("rank", [0, 1])
def test_include_workers_one_writes_only_rank_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rank: int) -> None:
    """Rank and world size come from torch.distributed (faked here; the real 2-process job is above)."""
    import torch
    from torch import nn

    from sdk_ext.pytorch import Hook, SaveConfig
    from tests.functional.pytorch.models import Net, batches, train

    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: rank)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    train(model, loss_fn, batches(2))
    hook.close()
    assert hook.worker == f"worker_{rank}"
    if rank == 1:
        assert not any(tmp_path.iterdir())
    else:
        assert dump_with_format(tmp_path)["workers"] == ["worker_0"]
        meta = json.loads((tmp_path / "collections/000000000/worker_0_collections.json").read_text())["_meta"]
        assert meta == {"num_workers": 1}
