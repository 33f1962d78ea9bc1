"""The launch decision (sdk_ext/local/jobs/launcher.py) and worker names from the environment
(sdk_ext/hooks/workers.py): pure functions, no process started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import workers
from sdk_ext.local.jobs import hosts, launcher


def _hosts(tmp_path: Path, count: int = 2, gpus: list[str] | None = None) -> list[hosts.EmulatedHost]:
    req = {"ResourceConfig": {"InstanceCount": count, "InstanceType": "ml.g5.12xlarge"}}
    return hosts.plan_hosts(tmp_path, req, gpus=gpus or [], cpus=4)


@pytest.mark.parametrize(("hps", "env", "kind", "per_host"), [
    ({}, {}, launcher.PROCESS, 1),
    ({"sagemaker_torch_distributed_enabled": "true"}, {}, launcher.TORCHRUN, 1),
    ({"sagemaker_torch_distributed_enabled": "true"}, {"SDK_EXT_PROCESSES_PER_HOST": "4"}, launcher.TORCHRUN, 4),
    ({"sagemaker_pytorch_ddp_enabled": "true"}, {}, launcher.TORCHRUN, 1),
    ({"sagemaker_torch_distributed_enabled": "false"}, {}, launcher.PROCESS, 1),
    ({}, {"SDK_EXT_PROCESSES_PER_HOST": "3"}, launcher.TORCHRUN, 3),
])
def test_the_request_chooses_the_launcher_as_sagemakers_containers_do(tmp_path: Path, hps: dict[str, str],
                                                                      env: dict[str, str], kind: str,
                                                                      per_host: int) -> None:
    plan = launcher.choose({"HyperParameters": hps, "Environment": env}, host=_hosts(tmp_path)[0])
    assert (plan.kind, plan.processes_per_host) == (kind, per_host)


def test_torchrun_runs_one_process_per_gpu_and_hosts_share_the_gpus_out(tmp_path: Path) -> None:
    two = _hosts(tmp_path, 2, gpus=["0", "1", "2", "3"])
    assert [(h.num_gpus, h.gpu_ids) for h in two] == [(2, ("0", "1")), (2, ("2", "3"))]
    plan = launcher.choose({"HyperParameters": {"sagemaker_torch_distributed_enabled": "true"}}, host=two[0])
    assert plan.processes_per_host == 2
    assert hosts.host_env(two[1], master_port=1234)["CUDA_VISIBLE_DEVICES"] == "2,3"
    few = _hosts(tmp_path, 3, gpus=["0"])
    assert [(h.num_gpus, h.gpu_ids) for h in few] == [(1, None)] * 3  # fewer GPUs than hosts: all see them
    assert [h.num_cpus for h in few] == [1, 1, 1]


def test_launchers_that_cannot_run_here_are_refused_with_the_reason(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    host = _hosts(tmp_path)[0]
    with pytest.raises(ConfigError, match="smdistributed"):
        launcher.choose({"HyperParameters": {"sagemaker_distributed_dataparallel_enabled": "true"}}, host=host)
    with pytest.raises(ConfigError, match="whole number >= 1"):
        launcher.choose({"Environment": {"SDK_EXT_PROCESSES_PER_HOST": "0"}}, host=host)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="not installed"):
        launcher.choose({"HyperParameters": {"sagemaker_mpi_enabled": "true"}}, host=host)


def test_mpirun_starts_each_hosts_ranks_with_that_hosts_environment(tmp_path: Path) -> None:
    two = _hosts(tmp_path)
    plan = launcher.LaunchPlan(launcher.MPIRUN, 3, "test")
    [spec] = launcher.process_specs(plan, two, ["python", "train.py"], host_env=lambda h: hosts.host_env(
        h, master_port=99), run_id="job", master_port=99, single_log=tmp_path / "training.log")
    argv = spec.argv
    assert argv.count("-np") == 2 and argv.count(":") == 1 and argv.count("train.py") == 2
    second = argv[argv.index(":"):]
    assert "SM_CURRENT_HOST=algo-2" in second and "SM_CURRENT_HOST_RANK=1" in second
    assert "SM_CURRENT_HOST=algo-2" not in argv[:argv.index(":")]


def test_worker_names_come_from_tf_config_or_a_launchers_rank() -> None:
    cluster = {"chief": ["a:1"], "worker": ["b:1", "c:1"], "ps": ["d:1"]}
    tf = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}})}
    assert workers.tf_config_rank(tf) == (2, 3)
    chief = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})}
    assert workers.environment_rank(chief) == (0, 3)
    ps = {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "ps", "index": 0}})}
    assert workers.tf_config_rank(ps) is None
    assert workers.launcher_rank({"RANK": "5", "WORLD_SIZE": "8"}) == (5, 8)
    assert workers.launcher_rank({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}) == (1, 2)
    assert workers.launcher_rank({"RANK": "9", "WORLD_SIZE": "8"}) is None
    assert workers.environment_rank({}) is None


def test_a_framework_free_hook_in_a_launched_rank_writes_as_that_worker(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from sdk_ext.hooks import Hook, SaveConfig

    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    hook = Hook(str(tmp_path / "trial"), save_config=SaveConfig(save_interval=1), include_workers="all")
    with hook.step():
        hook.save_tensor("x", np.ones(3, dtype=np.float32), "weights")
    hook.close()
    index = [p.name for p in (tmp_path / "trial" / "index").rglob("*.json")]
    assert index == ["000000000000_worker_2.json"]
    collections = json.loads(next((tmp_path / "trial" / "collections").rglob("*.json")).read_text())
    assert collections["_meta"]["num_workers"] == 4
