"""Profiler rules through rules/evaluate.py, ``sdk-ext rules``, ``sdk-ext profile`` and ``sdk-ext report``, over
profiler output written with the format codecs (what a GPU host would have written: this machine has none)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sdk_ext.cli import main as sdk_ext_main
from sdk_ext.debugger import ProfilerRule, rule_configs
from tests.conftest import REPO
from tests.unit.profiler_rules.events import T0
from tests.unit.profiler_rules.files import end_job, local, metric, step_events, write_system, write_trace

EVALUATE = str(REPO / "rules" / "evaluate.py")


def evaluate(args: list[str], env: dict[str, str]) -> tuple[int, dict, str]:
    proc = subprocess.run([sys.executable, EVALUATE, *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    out = Path(args[args.index("--output-dir") + 1])
    status = json.loads((out / "status.json").read_text()) if (out / "status.json").exists() else {}
    return proc.returncode, status, proc.stderr


def _host(gpu: float, n: int = 1500, *, cores: int = 2) -> list:
    """n samples 0.1 s apart of a host with one GPU at ``gpu`` percent and busy-ish CPUs."""
    out = []
    for i in range(n):
        t = T0 + i * 0.1
        out += [metric("CPUUtilization", f"cpu{c}", 40, t) for c in range(cores)]
        out += [metric("GPUUtilization", "gpu0", gpu, t + 0.001), metric("GPUMemoryUtilization", "gpu0", 30, t + 0.001),
                metric("", "MemoryUsedPercent", 20, t)]
    return out


@pytest.fixture
def idle_gpu_job(tmp_path) -> Path:
    """profiler-output of a finished job whose GPU idles at 20% and with 12 slow steps in 212."""
    root = tmp_path / "profiler-output"
    storage = local(root)
    write_system(storage, _host(20))
    write_trace(storage, step_events([0.01] * 200 + [1.0] * 12, start=T0 + 5))
    end_job(storage)
    return root


@pytest.fixture
def busy_gpu_job(tmp_path) -> Path:
    root = tmp_path / "busy" / "profiler-output"
    storage = local(root)
    write_system(storage, _host(95))
    write_trace(storage, step_events([0.01] * 300, start=T0 + 5))
    end_job(storage)
    return root


def _params(rule) -> list[str]:
    """The --param arguments of what ProfilerRule.sagemaker(rule_configs.X()) sends."""
    sent = ProfilerRule.sagemaker(rule).to_profiler_rule_config_dict()["RuleParameters"]
    return [a for k, v in sent.items() for a in ("--param", f"{k}={v}")]


def test_low_gpu_utilization_fires_on_an_idle_gpu_from_the_sdks_payload(idle_gpu_job, tmp_path, repo_env):
    out = tmp_path / "out"
    code, status, err = evaluate(["--trial-dir", str(idle_gpu_job), "--output-dir", str(out),
                                  *_params(rule_configs.LowGPUUtilization())], repo_env)
    assert code == 3, err
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert status["StatusDetails"].startswith("RuleEvaluationConditionMet: Evaluation of the rule LowGPUUtilization")
    assert "gpu0 on algo-1 is underutilized" in status["StatusDetails"]
    report = json.loads((out / "profiler-output" / "profiler-reports" / "LowGPUUtilization.json").read_text())
    assert report["RuleTriggered"] >= 1 and report["Details"]["algo-1"]["gpu0"]["p50"] == 20


def test_low_gpu_utilization_quiet_on_a_busy_gpu(busy_gpu_job, tmp_path, repo_env):
    code, status, err = evaluate(["--trial-dir", str(busy_gpu_job.parent), "--output-dir", str(tmp_path / "o"),
                                  *_params(rule_configs.LowGPUUtilization())], repo_env)
    assert code == 0, err
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert status["StatusDetails"].startswith("Training ended; profiler data evaluated up to")


def test_a_rule_whose_data_is_absent_says_it_checked_nothing(busy_gpu_job, tmp_path, repo_env):
    code, status, _ = evaluate(["--trial-dir", str(busy_gpu_job), "--output-dir", str(tmp_path / "o"),
                                "--rule-name", "Dataloader"], repo_env)
    assert code == 0 and status["StatusDetails"].startswith("CheckedNothing: the profiler data holds no PyTorch")


def test_profiler_report_reports_issues_at_the_end_with_every_rules_report_and_the_page(idle_gpu_job, tmp_path,
                                                                                       repo_env):
    out = tmp_path / "out"
    code, status, err = evaluate(["--trial-dir", str(idle_gpu_job), "--output-dir", str(out),
                                  *_params(rule_configs.ProfilerReport(CPUBottleneck_threshold=90))], repo_env)
    assert code == 3, err
    assert "LowGPUUtilization: gpu0 on algo-1 is underutilized" in status["StatusDetails"]
    assert "StepOutlier: 12 of 212 TRAIN steps" in status["StatusDetails"]
    reports = out / "profiler-output" / "profiler-reports"
    assert len(list(reports.glob("*.json"))) == 11
    assert "threshold:90" in json.loads((reports / "CPUBottleneck.json").read_text())["RuleParameters"]
    page = (out / "profiler-output" / "profiler-report.html").read_text()
    assert "<svg" in page and "Utilization on algo-1" in page and "<script" not in page
    assert "LowGPUUtilization" in page and "What to try" in page


def test_bad_parameters_and_no_data_are_client_errors(idle_gpu_job, tmp_path, repo_env):
    code, status, _ = evaluate(["--trial-dir", str(idle_gpu_job), "--output-dir", str(tmp_path / "a"),
                                "--rule-name", "ProfilerReport", "--param", "CPUBottlenek_threshold=9"], repo_env)
    assert code == 2 and "CPUBottlenek_threshold: expected <Rule>_<parameter>" in status["StatusDetails"]
    code, status, _ = evaluate(["--trial-dir", str(idle_gpu_job), "--output-dir", str(tmp_path / "b"),
                                "--rule-name", "StepOutlier", "--param", "stddev=three"], repo_env)
    assert code == 2 and "stddev='three'" in status["StatusDetails"]
    empty = tmp_path / "empty"
    end_job(local(empty))
    code, status, _ = evaluate(["--trial-dir", str(empty), "--output-dir", str(tmp_path / "c"),
                                "--rule-name", "LowGPUUtilization"], repo_env)
    assert code == 2 and "No profiler data was saved by the training job" in status["StatusDetails"]


def test_sdk_ext_rules_runs_profiler_rules_over_saved_output_without_its_end_marker(idle_gpu_job, tmp_path, capsys):
    for marker in idle_gpu_job.glob("*/training_job_end.ts"):
        marker.unlink()  # a copy of a running job's output: saved output is complete anyway
    code = sdk_ext_main(["rules", str(idle_gpu_job), "--rule", "LowGPUUtilization", "--rule", "StepOutlier",
                         "--rule-param", "StepOutlier:n_outliers=20", "--output-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 3
    assert "LowGPUUtilization: IssuesFound" in out and "StepOutlier: NoIssuesFound" in out


def test_sdk_ext_profile_prints_the_summary(idle_gpu_job, capsys):
    assert sdk_ext_main(["profile", str(idle_gpu_job)]) == 0
    out = capsys.readouterr().out
    assert "hosts: algo-1 (2 cores, 1 GPUs)" in out
    assert "algo-1 gpu0: p50 20%" in out
    assert "steps TRAIN on 1234-algo-1: 212" in out and "12 outliers" in out and "steps 200, 201" in out
    assert "first step: 5.0 s after the first sample" in out
    assert sdk_ext_main(["profile", str(idle_gpu_job), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"][0]["outliers"] == list(range(200, 212)) and doc["hosts"] == {"algo-1": {"cores": 2, "gpus": 1}}


def test_sdk_ext_profile_without_data_exits_1(tmp_path, capsys):
    end_job(local(tmp_path / "none"))
    assert sdk_ext_main(["profile", str(tmp_path / "none")]) == 1
    assert "no profiler data" in capsys.readouterr().out


def test_sdk_ext_report_of_profiler_output_alone(idle_gpu_job, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert sdk_ext_main(["report", str(idle_gpu_job), "-o", str(out)]) == 0
    page = out.read_text()
    assert "<h2>Profiling</h2>" in page and "Step durations: TRAIN on 1234-algo-1" in page
    assert page.count("<svg") >= 2 and "<script" not in page
