"""Several emulated hosts and processes in a local job (sdk_ext/local/jobs/hosts.py, launcher.py).

The scripts here import no framework (a few hundred ms each), so 2 hosts x 2 processes stay cheap;
the real gloo/FSDP2 job is tests/functional/local/test_fsdp_nan_example.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sdk_ext.cli import main as sdk_ext
from sdk_ext.exceptions import ConfigError
from sdk_ext.local import LocalSageMakerClient
from tests.functional.local.support import poll_until, request, settings, wait_gone, write_script

# Each process records what it was given, then trains (sleeps) until SLEEP is over; RANK 3 can fail.
ENV_DUMP = """
import json, os, sys, time
from pathlib import Path
out = Path(os.environ["SM_OUTPUT_DATA_DIR"])
name = f"{os.environ['SM_CURRENT_HOST']}-{os.environ.get('RANK', 'x')}"
keys = [k for k in os.environ if k.startswith(("SM_", "RANK", "LOCAL_", "WORLD", "MASTER", "GROUP", "ROLE",
                                              "TORCHELASTIC", "OMP_", "TF_CONFIG", "CUDA_VISIBLE"))]
record = {k: os.environ[k] for k in keys}
record["pid"] = os.getpid()
record["resourceconfig"] = json.load(open(Path(os.environ["SM_INPUT_CONFIG_DIR"]) / "resourceconfig.json"))
(out / f".{name}.json").write_text(json.dumps(record))
os.replace(out / f".{name}.json", out / f"{name}.json")
print("started", name, flush=True)
if os.environ.get("RANK") == os.environ.get("FAIL_RANK", "-"):
    time.sleep(0.3)
    raise ValueError(f"rank {os.environ['RANK']}'s data went bad")
deadline = time.monotonic() + float(os.environ.get("SLEEP", "0"))
while time.monotonic() < deadline:
    time.sleep(0.05)
"""


def _records(job_dir: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (job_dir / "output" / "data").glob("algo-*.json")}


def _run_cli(tmp_path: Path, script: Path, *options: str) -> tuple[int, Path]:
    code = sdk_ext(["run", str(script), "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "mh", "-q",
                    "--no-zero-change", "--stop-grace", "3", *options])
    return code, tmp_path / "jobs" / "mh"


def test_hosts_and_ranks_get_sagemakers_environment_and_torchruns(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                   ) -> None:
    script = write_script(tmp_path, ENV_DUMP)
    code, job_dir = _run_cli(tmp_path, script, "--instance-count", "2", "--processes-per-host", "2")
    assert code == 0, capsys.readouterr()
    records = _records(job_dir)
    assert sorted(records) == ["algo-1-0", "algo-1-1", "algo-2-2", "algo-2-3"]
    ports = {r["SM_MASTER_PORT"] for r in records.values()}
    assert len(ports) == 1 and int(next(iter(ports))) > 0
    for name, r in records.items():
        host, rank = name.rsplit("-", 1)
        host_rank = int(host.split("-")[1]) - 1
        assert json.loads(r["SM_HOSTS"]) == ["algo-1", "algo-2"]
        assert (r["SM_CURRENT_HOST"], r["SM_HOST_COUNT"], r["SM_CURRENT_HOST_RANK"]) == (host, "2", str(host_rank))
        assert r["SM_MASTER_ADDR"] == r["MASTER_ADDR"] == "127.0.0.1" and r["MASTER_PORT"] == r["SM_MASTER_PORT"]
        assert int(r["SM_NUM_CPUS"]) >= 1 and r["SM_NUM_GPUS"] == "0"
        assert r["resourceconfig"]["current_host"] == host and r["resourceconfig"]["hosts"] == ["algo-1", "algo-2"]
        assert (r["RANK"], r["WORLD_SIZE"], r["LOCAL_RANK"], r["LOCAL_WORLD_SIZE"]) == (
            rank, "4", str(int(rank) % 2), "2")
        assert (r["GROUP_RANK"], r["GROUP_WORLD_SIZE"], r["ROLE_RANK"]) == (str(host_rank), "2", rank)
        assert r["TORCHELASTIC_RUN_ID"] == "mh" and r["OMP_NUM_THREADS"] == "1"
    saved = json.loads((job_dir / "request.json").read_text())
    assert saved["ResourceConfig"]["InstanceCount"] == 2
    assert saved["Environment"]["SDK_EXT_PROCESSES_PER_HOST"] == "2"
    assert saved["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    log = (job_dir / "logs" / "training.log").read_text()
    assert "[algo-2 rank 3] started algo-2-3" in log
    assert "started algo-2-3" in (job_dir / "logs" / "algo-2" / "rank-3.log").read_text()
    assert "2 hosts x 2 processes (torchrun" in capsys.readouterr().out


def test_a_rank_that_dies_fails_the_job_naming_it_and_every_other_rank_ends(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIL_RANK", "3")
    monkeypatch.setenv("SLEEP", "60")  # the others would wait for it (as in a collective) for a minute
    script = write_script(tmp_path, ENV_DUMP)
    started = time.monotonic()
    code, job_dir = _run_cli(tmp_path, script, "--instance-count", "2", "--processes-per-host", "2")
    assert code == 1 and time.monotonic() - started < 40
    job = json.loads((job_dir / "job.json").read_text())
    assert job["TrainingJobStatus"] == "Failed"
    reason = job["FailureReason"]
    assert "rank 3 (host algo-2, local rank 1) failed first" in reason
    assert "ValueError: rank 3's data went bad" in reason and "logs/algo-2/rank-3.log" in reason
    codes = {p["Rank"]: p["ExitCode"] for p in job["SdkExtLocal"]["Processes"]}
    assert codes[3] == 1 and all(c != 0 for c in codes.values())  # the others were stopped
    assert wait_gone([r["pid"] for r in _records(job_dir).values()], timeout=5) == []


def test_a_stop_ends_every_rank_on_every_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEEP", "120")
    script = write_script(tmp_path, ENV_DUMP)
    client = LocalSageMakerClient(settings(tmp_path))
    req = request("stopme", ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 2, "VolumeSizeInGB": 1},
                  HyperParameters={"sagemaker_torch_distributed_enabled": "true",
                                   "sagemaker_program": json.dumps(script.name),
                                   "sagemaker_submit_directory": json.dumps(str(script.parent))},
                  Environment={"SDK_EXT_PROCESSES_PER_HOST": "2", "SDK_EXT_ZERO_CHANGE": "0"})
    client.create_training_job(**req)
    job_dir = tmp_path / "jobs" / "stopme"
    records = poll_until(lambda: (r := _records(job_dir)) and len(r) == 4 and r, timeout=60)
    client.stop_training_job(TrainingJobName="stopme")
    final = client.wait("stopme", timeout=60)
    assert final["TrainingJobStatus"] == "Stopped"
    assert wait_gone([r["pid"] for r in records.values()], timeout=10) == []


def test_mpi_without_mpirun_is_refused_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    monkeypatch.setenv("PATH", str(bin_dir))  # no mpirun anywhere
    script = write_script(tmp_path, ENV_DUMP)
    client = LocalSageMakerClient(settings(tmp_path))
    req = request("mpi", HyperParameters={"sagemaker_mpi_enabled": "true",
                                          "sagemaker_mpi_num_of_processes_per_host": "2"})
    with pytest.raises(ConfigError, match="mpirun, which is not installed"):
        client.prepare_job(req, entry_point=script)
    assert not (tmp_path / "jobs" / "mpi" / "logs").exists()


def test_an_sdk_v3_torchrun_request_runs_its_entry_script_on_every_rank(tmp_path: Path) -> None:
    code = tmp_path / "code"
    write_script(tmp_path, ENV_DUMP, name="entry.py")
    drivers = tmp_path / "sm_drivers"
    drivers.mkdir()
    (drivers / "sourcecode.json").write_text(json.dumps({"entry_script": "entry.py", "command": None}))
    (drivers / "distributed.json").write_text(json.dumps({"process_count_per_node": 3, "smp": None}))
    channels = [{"ChannelName": name, "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": str(path)}}}
                for name, path in (("code", code), ("sm_drivers", drivers))]
    req = request("v3", InputDataConfig=channels, Environment={"SDK_EXT_ZERO_CHANGE": "0"},
                  AlgorithmSpecification={"TrainingImage": "local", "TrainingInputMode": "File",
                                          "ContainerEntrypoint": ["/bin/bash"],
                                          "ContainerArguments": ["-c", "/opt/ml/input/data/sm_drivers/sm_train.sh"]})
    final = LocalSageMakerClient(settings(tmp_path)).run_training_job(req)
    assert final["TrainingJobStatus"] == "Completed", final.get("FailureReason")
    records = _records(tmp_path / "jobs" / "v3")
    assert sorted(records) == ["algo-1-0", "algo-1-1", "algo-1-2"]
    r = records["algo-1-2"]
    assert json.loads(r["SM_DISTRIBUTED_CONFIG"])["process_count_per_node"] == 3
    assert r["SM_ENTRY_SCRIPT"] == "entry.py" and r["WORLD_SIZE"] == "3" and r["SM_HOST_COUNT"] == "1"


def test_tensorflow_multi_worker_hosts_each_get_their_tf_config(tmp_path: Path) -> None:
    script = write_script(tmp_path, ENV_DUMP)
    req = request("tf", ResourceConfig={"InstanceType": "ml.m5.large", "InstanceCount": 2, "VolumeSizeInGB": 1},
                  HyperParameters={"sagemaker_multi_worker_mirrored_strategy_enabled": "true"},
                  Environment={"SDK_EXT_ZERO_CHANGE": "0"})
    final = LocalSageMakerClient(settings(tmp_path)).run_training_job(req, entry_point=script)
    assert final["TrainingJobStatus"] == "Completed", final.get("FailureReason")
    records = _records(tmp_path / "jobs" / "tf")
    assert sorted(records) == ["algo-1-x", "algo-2-x"]
    configs = [json.loads(records[f"algo-{k}-x"]["TF_CONFIG"]) for k in (1, 2)]
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert configs[0]["cluster"] == configs[1]["cluster"] and len(configs[0]["cluster"]["worker"]) == 2
