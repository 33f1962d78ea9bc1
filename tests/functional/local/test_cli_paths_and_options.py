"""The CLI as a user types it: relative paths are the caller's, nothing is left in /tmp, a rule file may live
in a folder with a space, an explicit save setting wins over the default (and two explicit ones that disagree
are refused), ``sdk-ext trial`` counts a collection as ``tensor_names(collection=...)`` does, and a job a rule
stops keeps the last step the script trained."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.trials import create_trial
from tests.conftest import SMDEBUG_FIXTURES
from tests.functional.rules.test_evaluate import CUSTOM
from tests.functional.rules.trial_writer import write_trial


def _cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sdk_ext.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture
def vanishing(tmp_path: Path) -> Path:
    return write_trial(tmp_path / "trial", [(0, {"gradient/fc1.weight": np.full(8, 0.5)}),
                                            (4, {"gradient/fc1.weight": np.full(8, 1e-9)})])


def test_rules_with_a_relative_trial_and_a_relative_output_dir(vanishing: Path, tmp_path: Path,
                                                               repo_env: dict[str, str]) -> None:
    done = _cli("rules", "trial", "--rule", "VanishingGradient", "--output-dir", "relout", env=repo_env,
                cwd=tmp_path, timeout=90)  # it used to look for the trial under relout/<rule>/ forever
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith("VanishingGradient: IssuesFound at step 4")
    status = json.loads((tmp_path / "relout" / "VanishingGradient" / "status.json").read_text())  # not nested
    assert status["RuleEvaluationStatus"] == "IssuesFound"
    assert f"status files and logs: {tmp_path / 'relout'}" in done.stdout


def test_rules_without_output_dir_leave_nothing_in_the_temporary_directory(vanishing: Path, tmp_path: Path,
                                                                          repo_env: dict[str, str]) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = _cli("rules", str(vanishing), "--rule", "VanishingGradient", env={**repo_env, "TMPDIR": str(scratch)},
                cwd=tmp_path, timeout=90)
    assert done.returncode == 3, done.stdout + done.stderr
    assert [p.name for p in scratch.iterdir() if p.name.startswith("sdk-ext-rules-")] == []


def test_a_custom_rule_file_in_a_folder_with_a_space(vanishing: Path, tmp_path: Path,
                                                     repo_env: dict[str, str]) -> None:
    folder = tmp_path / "my rules"
    folder.mkdir()
    (folder / "grad rule.py").write_text(CUSTOM)
    done = _cli("rules", str(vanishing), "--custom-rule", f"{folder / 'grad rule.py'}:GradientTooSmall",
                "--rule-param", "GradientTooSmall:threshold=0.01", env=repo_env, cwd=tmp_path, timeout=90)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith("GradientTooSmall: IssuesFound at step 4")


# Seven TRAIN steps through the hook of the job's config: which steps are saved shows the save interval.
SEVEN_STEPS = textwrap.dedent("""
    import numpy as np
    from sdk_ext.hooks import Hook
    from sdk_ext.modes import ModeKeys
    hook = Hook.create_from_json_file()
    hook.set_mode(ModeKeys.TRAIN)
    for step in range(7):
        with hook.step():
            hook.save_tensor("loss", np.float32(step), "losses")
            hook.save_tensor("gradient/w", np.full(3, step, dtype=np.float32), "gradients")
    hook.close()
""")


def _run_seven(tmp_path: Path, repo_env: dict[str, str], *options: str) -> tuple[subprocess.CompletedProcess[str],
                                                                                   Path]:
    script = tmp_path / "seven.py"
    script.write_text(SEVEN_STEPS)
    done = _cli("run", str(script), "--no-zero-change", "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "seven",
                "--collection", "gradients", *options, env=repo_env, cwd=tmp_path)
    return done, tmp_path / "jobs" / "seven"


def test_a_hook_param_save_interval_is_not_overridden_by_the_default(tmp_path: Path,
                                                                     repo_env: dict[str, str]) -> None:
    done, job = _run_seven(tmp_path, repo_env, "--hook-param", "train.save_interval=3", "--rule",
                           "VanishingGradient")  # the rule's collections come with their own 500-step default
    assert done.returncode == 0, done.stdout + done.stderr
    trial = create_trial(str(job / "output" / "tensors"))
    assert trial.tensor("gradient/w").steps() == [0, 3, 6]  # the default 10 would have saved step 0 only
    assert trial.tensor("loss").steps() == [0, 3, 6]


@pytest.mark.parametrize(("options", "message"), [
    (("--save-interval", "5", "--hook-param", "save_interval=3"),
     "--save-interval 5 and --hook-param save_interval=3 disagree"),
    (("--save-interval", "5", "--collection-param", "gradients:save_interval=3"),
     "--save-interval 5 (every collection) and --collection-param gradients:save_interval=3 disagree"),
])
def test_two_explicit_save_settings_that_disagree_are_refused(options: tuple[str, ...], message: str,
                                                              tmp_path: Path, repo_env: dict[str, str]) -> None:
    done, job = _run_seven(tmp_path, repo_env, *options)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert not job.exists()


def test_trial_counts_a_collection_as_tensor_names_does(tmp_path: Path, repo_env: dict[str, str]) -> None:
    # written by real smdebug: its collections file lists some names, its regexes match more
    path = SMDEBUG_FIXTURES / "a_core_numpy" / "out"
    trial = create_trial(str(path))
    expected = {n: sorted(trial.tensor_names(collection=n)) for n in trial.collections()}
    assert len(expected["gradients"]) == 2 and len(trial.collection("gradients").tensor_names) == 1
    summary = json.loads(_cli("trial", str(path), "--json", env=repo_env, cwd=tmp_path).stdout)
    assert summary["collections"] == expected
    shown = _cli("trial", str(path), env=repo_env, cwd=tmp_path)
    line = next(ln for ln in shown.stdout.splitlines() if ln.strip().startswith("collections:"))
    for name, names in expected.items():
        assert f"{name} ({len(names)})" in line, line
    assert "WARNING" not in shown.stderr  # counting looks no collection up by name (which would warn)


def test_a_job_stopped_by_stalled_training_keeps_the_last_step_it_trained(tmp_path: Path,
                                                                         repo_env: dict[str, str]) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "stall.py"
    script.write_text(textwrap.dedent("""
        import time, torch
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = torch.nn.MSELoss()
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        for step in range(1000):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            print("trained step", step, flush=True)
            if step == 9:
                time.sleep(120)  # stalls after training step 9; the zero-change hook has step 9 open
    """))
    done = _cli("run", str(script), "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "stall", "--save-interval",
                "1", "--rule", "StalledTrainingRule", "--rule-param", "StalledTrainingRule:threshold=6",
                env=repo_env, cwd=tmp_path, timeout=240)
    assert "rule StalledTrainingRule stopped the job" in done.stdout, done.stdout + done.stderr
    log = (tmp_path / "jobs" / "stall" / "logs" / "training.log").read_text()
    assert "trained step 9" in log and "trained step 10" not in log  # it was stopped while stalled
    trial = create_trial(str(tmp_path / "jobs" / "stall" / "output" / "tensors"))
    assert trial.steps()[-1] == 9  # it was 8: the open step died with the process
