"""Where the CLI reads from: an ``s3://`` trial in every verb (moto over HTTP), a path that does not exist."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sdk_ext.local import run_training_job
from tests.functional.local.support import HOOKED, request, rule, settings, write_script
from tests.moto_s3 import S3Env


@pytest.fixture(scope="module")
def saved_trial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trial whose tensors go NaN at step 20 (the job is stopped by the fake rule soon after)."""
    tmp = tmp_path_factory.mktemp("s3trial")
    script = write_script(tmp, HOOKED)
    req = request("to-s3", rules=[rule("Exploding", fake="fire_on_file", file="bad_step")])
    final = run_training_job(req, settings=settings(tmp), entry_point=script)
    assert final["TrainingJobStatus"] == "Stopped"
    return tmp / "jobs" / "to-s3" / "output" / "tensors"


def _cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sdk_ext.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture
def s3_trial(s3: S3Env, saved_trial: Path, repo_env: dict[str, str]) -> tuple[str, dict[str, str]]:
    s3.upload_dir(saved_trial, "job/debug-output")
    return s3.uri("job/debug-output"), {**repo_env, **s3.env}


def test_cli_trial_reads_an_s3_uri(s3_trial: tuple[str, dict[str, str]]) -> None:
    uri, env = s3_trial
    result = _cli("trial", uri, "--json", env=env)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["path"] == uri
    assert "gradient/Net_fc1.weight" in summary["tensors"] and summary["last_step"] >= 21


def test_cli_rules_on_an_s3_uri_runs_the_real_evaluator_to_a_verdict(s3_trial: tuple[str, dict[str, str]],
                                                                      tmp_path: Path) -> None:
    uri, env = s3_trial
    result = _cli("rules", uri, "--rule", "ExplodingTensor", "--output-dir", str(tmp_path / "out"), env=env,
                  timeout=90)
    assert result.returncode == 3, result.stdout + result.stderr  # IssuesFound; it used to poll s3:/... forever
    line = result.stdout.splitlines()[0]
    assert line.startswith("ExplodingTensor: IssuesFound at step 20 (tensor ")  # the reason, whole
    assert "Evaluation of the rule" not in line and line.endswith("values out of 32)")


def test_cli_report_of_an_s3_uri(s3_trial: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    uri, env = s3_trial
    out = tmp_path / "r.html"
    result = _cli("report", uri, "-o", str(out), env=env)
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    assert uri in html and html.count("<svg") == 3


@pytest.mark.parametrize("verb", [["trial"], ["rules", "--rule", "ExplodingTensor"], ["report"]])
def test_cli_says_at_once_that_a_path_does_not_exist(verb: list[str], tmp_path: Path,
                                                      repo_env: dict[str, str]) -> None:
    missing = tmp_path / "nonexistent"
    result = _cli(verb[0], str(missing), *verb[1:], env=repo_env)
    assert result.returncode == 2
    assert f"{missing} does not exist" in result.stderr
    assert "collections" not in result.stderr.lower()  # not the trial's wait for a collections file
