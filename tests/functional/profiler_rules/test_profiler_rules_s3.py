"""Profiler rules over a job's profiler output on S3 (moto over HTTP), as on disk; a failed listing raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sdk_ext.cli import main as sdk_ext_main
from sdk_ext.exceptions import StorageError
from sdk_ext.profiler.analysis.rules import LowGPUUtilization, StepOutlier
from sdk_ext.profiler.profiler_trial import ProfilerTrial
from sdk_ext.rules import invoke_rule
from tests.unit.profiler_rules.events import T0
from tests.unit.profiler_rules.files import end_job, local, metric, step_events, write_system, write_trace


def _output(root: Path) -> Path:
    storage = local(root)
    write_system(storage, [metric("GPUUtilization", "gpu0", 20, T0 + i * 0.1) for i in range(1500)])
    write_trace(storage, step_events([0.01] * 200 + [1.0] * 12, start=T0 + 5))
    end_job(storage)
    return root


def test_rules_on_s3_judge_as_on_disk_and_the_cli_reads_s3(s3: Any, tmp_path: Path, capsys) -> None:
    on_disk = _output(tmp_path / "profiler-output")
    s3.upload_dir(on_disk, "out/job-1/profiler-output")
    uri = s3.uri("out/job-1/profiler-output")
    verdicts = {}
    for where in (str(on_disk), uri):
        rule = StepOutlier(ProfilerTrial(where))
        with pytest.raises(Exception) as fired:
            invoke_rule(rule, raise_eval_cond=True)
        verdicts[where] = (str(fired.value), json.dumps(rule.report, sort_keys=True, default=str))
    assert verdicts[str(on_disk)] == verdicts[uri]
    assert sdk_ext_main(["profile", uri]) == 0
    assert "12 outliers" in capsys.readouterr().out
    assert sdk_ext_main(["rules", uri, "--rule", "LowGPUUtilization"]) == 3


def test_a_failed_listing_raises_instead_of_looking_like_no_data(s3: Any) -> None:
    s3.proxy.add_fault(lambda seen: seen.method == "GET" and "list-type=2" in seen.query, "status", times=100,
                       status=403, code="AccessDenied")
    trial = ProfilerTrial(s3.uri("out/job-2/profiler-output"))
    with pytest.raises(StorageError):
        LowGPUUtilization(trial).invoke(0)
