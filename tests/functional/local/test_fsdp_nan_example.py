"""examples/fsdp_nan, reduced (2 emulated hosts x 2 processes, FSDP2 on gloo): one rank's data turns NaN,
ExplodingTensor reading every worker catches it, the auto-stop function stops the job, every rank on
both hosts ends, and the summary and the report name the worker and the step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.functional.local.support import wait_gone

pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fsdp_nan"


def test_fsdp2_job_on_two_hosts_is_stopped_naming_the_rank_whose_data_went_nan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(EXAMPLE))
    try:
        from demo import demo_args  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(EXAMPLE))
    from sdk_ext.cli import main as sdk_ext

    jobs = tmp_path / "jobs"
    code = sdk_ext(demo_args(jobs, steps=400, hosts=2, processes=2, nan_rank=3, nan_step=4,
                             extra=["--job-name", "fsdp-nan", "-q"]))
    out = capsys.readouterr().out
    assert code == 0, out  # --expect-status Stopped was met
    assert "rule ExplodingTensor stopped the job at step 4" in out
    assert "tensor 'CrossEntropyLoss_output_0' of worker_3 only has 1 NaN" in out
    job_dir = jobs / "fsdp-nan"
    job = json.loads((job_dir / "job.json").read_text())
    assert job["TrainingJobStatus"] == "Stopped"
    processes = job["SdkExtLocal"]["Processes"]
    assert [(p["Host"], p["Rank"]) for p in processes] == [("algo-1", 0), ("algo-1", 1), ("algo-2", 2), ("algo-2", 3)]
    assert all(p["ExitCode"] is not None for p in processes)
    assert wait_gone([p["Pid"] for p in processes], timeout=10) == []
    report = (job_dir / "report.html").read_text()
    assert "worker_3" in report and "CrossEntropyLoss_output_0 [worker_3]" in report
    assert "2 hosts x 2 processes (torchrun" in out and "4 workers saved" in out
