"""SageMaker's rule-stop signal (docs/RULES.md#stop-signal): a timestamp written into the file named by
SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE under the trial ends the evaluation, after rule_stop_grace_time_secs,
with the normal end-of-job status. rules/evaluate.py as a subprocess on a trial that never gets its end marker."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.format.paths import END_OF_JOB
from sdk_ext.rules.stop_signal import StopSignal, StopSignalStorage, parse_grace
from sdk_ext.storage import InMemoryStorage
from tests.functional.rules.test_evaluate import EVALUATE, read_status, wait_for
from tests.functional.rules.trial_writer import write_trial


def start(trial: Path, out: Path, env: dict[str, str], **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, EVALUATE, "--trial-dir", str(trial), "--rule-name", "VanishingGradient",
                             "--output-dir", str(out), "--rule-configuration-name", "VG"],
                            env=dict(env, SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE="rule-stop-signal", **extra),
                            stderr=subprocess.PIPE, text=True)


def finish(rule: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    try:
        code = rule.wait(timeout=timeout)
    finally:
        if rule.poll() is None:
            rule.kill()
        _, stderr = rule.communicate()
    return code, stderr


def test_the_stop_signal_ends_the_evaluation_after_the_grace_period(tmp_path: Path, repo_env: dict[str, str]) -> None:
    trial, out = tmp_path / "trial", tmp_path / "out"
    write_trial(trial, [(0, {"gradient/w": np.full(4, 0.5)}), (1, {"gradient/w": np.full(4, 0.5)})], end=False)
    rule = start(trial, out, repo_env, rule_stop_grace_time_secs="1.5")  # a string, as the environment holds it
    assert wait_for(lambda: read_status(out).get("RuleEvaluationStatus") == "InProgress", what="InProgress")
    signalled = time.time()
    (trial / "rule-stop-signal").write_text(f"{signalled:.3f}")
    code, stderr = finish(rule, timeout=60)
    status = read_status(out)
    assert (code, status["RuleEvaluationStatus"], status["Step"]) == (0, "NoIssuesFound", None), stderr
    assert status["StatusDetails"].startswith("Training ended (rule stop signal of ")
    assert status["StatusDetails"].endswith(" + 1.5 s grace); last saved step: 1")
    ended = datetime.fromisoformat(status["LastModifiedTime"].replace("Z", "+00:00")).timestamp()
    assert ended >= signalled + 1.5 - 0.01  # not before the grace period (smdebug's bug made it 0)
    assert not (trial / END_OF_JOB).exists()  # the trial is only read


def test_an_old_signal_ends_at_once_and_a_rule_that_fires_first_still_reports_issues(
    tmp_path: Path, repo_env: dict[str, str]
) -> None:
    trial, out = tmp_path / "trial", tmp_path / "out"
    write_trial(trial, [(0, {"gradient/w": np.full(4, 0.5)})], end=False)
    (trial / "rule-stop-signal").write_text(str(time.time() - 3600))  # the default grace of 60 s is long over
    code, stderr = finish(start(trial, out, repo_env), timeout=60)
    assert (code, read_status(out)["RuleEvaluationStatus"]) == (0, "NoIssuesFound"), stderr
    assert "+ 60 s grace" in read_status(out)["StatusDetails"]

    bad = tmp_path / "bad"
    write_trial(bad, [(0, {"gradient/w": np.full(4, 1e-9)})], end=False)
    (bad / "rule-stop-signal").write_text(str(time.time() - 3600))
    code, _ = finish(start(bad, out, repo_env), timeout=60)
    assert (code, read_status(out)["Step"]) == (3, 0)  # the steps written before the end are evaluated


def test_a_job_stopped_before_writing_anything_is_the_usual_no_data_error(tmp_path: Path, repo_env: dict[str, str]) -> None:
    trial, out = tmp_path / "trial", tmp_path / "out"
    trial.mkdir()
    (trial / "rule-stop-signal").write_text(str(time.time() - 3600))
    code, stderr = finish(start(trial, out, repo_env), timeout=60)
    assert code == 2, stderr
    assert read_status(out)["StatusDetails"].startswith("ClientError: No debugging data was saved by the training job")


def test_a_bad_grace_period_is_an_error_naming_the_variable(tmp_path: Path, repo_env: dict[str, str]) -> None:
    trial, out = tmp_path / "trial", tmp_path / "out"
    write_trial(trial, [(0, {"gradient/w": np.full(4, 0.5)})], end=False)
    code, _ = finish(start(trial, out, repo_env, rule_stop_grace_time_secs="sixty"), timeout=60)
    assert code == 2
    assert "rule_stop_grace_time_secs='sixty' must be a number of seconds >= 0" in read_status(out)["StatusDetails"]


# --- the pieces, in process ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, grace", [(None, 60.0), ("", 60.0), ("60", 60.0), (" 0 ", 0.0), ("2.5", 2.5)])
def test_grace_is_parsed_as_a_number(value: str | None, grace: float) -> None:
    assert parse_grace(value) == grace


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "60s"])
def test_bad_grace_values_are_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="rule_stop_grace_time_secs"):
        parse_grace(value)


def test_no_signal_configured_means_no_wrapper() -> None:
    assert StopSignal.from_env({}) is None
    assert StopSignal.from_env({"SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE": "s"}) == StopSignal("s", 60.0)


def test_the_end_marker_appears_exactly_at_signal_time_plus_grace(tmp_path: Path) -> None:
    now = [1000.0]
    inner = InMemoryStorage()
    storage = StopSignalStorage(inner, StopSignal("sig", 10.0), clock=lambda: now[0])
    assert not storage.exists(END_OF_JOB)
    inner.write("sig", b"1005\n")
    now[0] = 1014.9
    assert not storage.exists(END_OF_JOB) and storage.signalled_at == 1005.0
    now[0] = 1015.0
    assert storage.exists(END_OF_JOB) and storage.ended_by_signal
    assert not storage.exists("other")
    garbled = StopSignalStorage(InMemoryStorage({"sig": b"not a time"}), StopSignal("sig", 5.0), clock=lambda: now[0])
    assert not garbled.exists(END_OF_JOB) and garbled.signalled_at == now[0]  # counted from when it was seen
    absolute = tmp_path / "signal"
    absolute.write_text("0")
    assert StopSignalStorage(InMemoryStorage(), StopSignal(str(absolute), 0.0)).exists(END_OF_JOB)
