"""The evaluator takes the paths users give (a file:// URI of a path with a space), waits for data only
as long as it is told, and a disk that is full does not turn an evaluation into a traceback."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tests.functional.rules.test_evaluate import CUSTOM, evaluate
from tests.functional.rules.trial_writer import write_trial
from tests.tmpfs import fill, mounted_tmpfs


def _trial(path: Path) -> Path:
    return write_trial(path, [(0, {"gradient/fc1.weight": np.full(8, 0.5)}),
                              (4, {"gradient/fc1.weight": np.full(8, 1e-9)})])


def test_a_custom_rule_source_uri_of_a_path_with_a_space_is_decoded(tmp_path: Path, repo_env: dict[str, str]) -> None:
    folder = tmp_path / "my rules"
    folder.mkdir()
    source = folder / "my rules.py"
    source.write_text(CUSTOM)
    assert "%20" in source.as_uri()  # what LocalSourceUploader (and any Path.as_uri()) sends
    code, status, err = evaluate(["--trial-dir", str(_trial(tmp_path / "trial")), "--param",
                                  f"source_s3_uri={source.as_uri()}", "--param", "rule_to_invoke=GradientTooSmall",
                                  "--param", "threshold=0.01", "--output-dir", str(tmp_path / "out")], repo_env)
    assert (code, status["RuleEvaluationStatus"], status["Step"]) == (3, "IssuesFound", 4), status or err


def test_wait_timeout_bounds_the_wait_for_a_trial_that_never_comes(tmp_path: Path, repo_env: dict[str, str]) -> None:
    empty = tmp_path / "not-the-trial"
    empty.mkdir()
    started = time.monotonic()
    code, status, _ = evaluate(["--trial-dir", str(empty), "--rule-name", "VanishingGradient", "--wait-timeout", "1",
                                "--poll-interval", "0.05", "--output-dir", str(tmp_path / "out")], repo_env,
                               timeout=60)
    assert time.monotonic() - started < 50
    assert (code, status["RuleEvaluationStatus"]) == (2, "Error")
    assert f"no data appeared under {empty} within 1 s (--wait-timeout)" in status["StatusDetails"]


def test_a_full_disk_for_the_status_file_ends_by_exit_code_without_a_traceback(tmp_path: Path,
                                                                               repo_env: dict[str, str]) -> None:
    trial = _trial(tmp_path / "trial")
    with mounted_tmpfs(tmp_path / "disk", size="1m") as disk:
        out = disk / "out"
        out.mkdir()
        fill(disk)
        code, status, err = evaluate(["--trial-dir", str(trial), "--rule-name", "VanishingGradient",
                                      "--output-dir", str(out)], repo_env)
        assert status == {}  # nothing could be written
    assert code == 3  # the outcome (IssuesFound) is still the exit code
    assert "Traceback" not in err, err
    assert f"could not write {out / 'status.json'}" in err and "No space left on device" in err
