"""SIGKILL in the middle of a step: both readers open the trial; every completed step is intact."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.format.paths import CLAIM_FILE
from tests.trial_dump import dump_with_format, dump_with_smdebug, dump_with_trials

SCRIPT = Path(__file__).with_name("plain_train.py")
KILL_AT = 4


@pytest.fixture(scope="module")
def killed_trial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import os

    from tests.conftest import REPO

    root = tmp_path_factory.mktemp("sigkill")
    config = root / "debughookconfig.json"
    config.write_text(json.dumps({
        "LocalPath": str(root / "tensors"),
        "HookParameters": {"save_interval": "1"},
        "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"}],
    }))
    env = dict(os.environ, PYTHONPATH=str(REPO), SMDEBUG_CONFIG_FILE_PATH=str(config))
    proc = subprocess.run([sys.executable, "-m", "sdk_ext.pytorch.run", str(SCRIPT), "10", str(KILL_AT)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -9, proc.stdout + proc.stderr  # killed by SIGKILL
    assert f"killing myself mid-step {KILL_AT}" in proc.stdout
    return root / "tensors"


def test_completed_steps_are_intact_and_the_step_in_progress_left_only_temporary_files(killed_trial: Path) -> None:
    dump = dump_with_format(killed_trial)
    assert dump["steps"]["GLOBAL"] == list(range(KILL_AT))
    assert not (killed_trial / "training_job_end.ts").exists()
    files = [str(p.relative_to(killed_trial)) for p in killed_trial.rglob("*") if p.is_file()]
    # the step in progress left only temporary files: its records, its index and the next step's
    # event file created ahead of time; nothing a reader takes for data
    partial = f"events/{KILL_AT:012d}/{KILL_AT:012d}_worker_0.tfevents."
    assert any(f.startswith(partial) and f.endswith(".tmp") for f in files)
    assert all(f.endswith(".tmp") for f in files if f"{KILL_AT:012d}_" in f or f"{KILL_AT + 1:012d}_" in f)
    # and the writer's claim (claim.smd, which readers skip, as smdebug's do): its lock died with the
    # process, so it does not stop the next run in this directory (tests/unit/hooks/test_claim.py)
    assert all(f.endswith((".tmp", ".json", ".tfevents")) or f == CLAIM_FILE for f in files)
    for step in range(KILL_AT):  # every completed step has its weights, gradients and loss
        names = {n for n, per_step in dump["tensors"].items() if str(step) in per_step}
        assert {"Net_fc1.weight", "gradient/Net_fc1.weight", "CrossEntropyLoss_output_0"} <= names
        assert np.isfinite(np.frombuffer(__import__("base64").b64decode(
            dump["tensors"]["Net_fc1.weight"][str(step)]["worker_0"]["value"]["b64"]), np.float32)).all()


@pytest.mark.smdebug
def test_smdebug_opens_the_killed_trial(killed_trial: Path, smdebug_python: Path, tmp_path: Path) -> None:
    theirs = dump_with_smdebug(smdebug_python, killed_trial, tmp_path)
    ours = dump_with_format(killed_trial)
    assert theirs["loaded_all_steps"] is False
    assert theirs["steps"]["GLOBAL"] == list(range(KILL_AT))
    assert theirs["tensors"] == ours["tensors"]


def test_the_projects_reader_opens_the_killed_trial(killed_trial: Path) -> None:
    mine, ours = dump_with_trials(killed_trial), dump_with_format(killed_trial)
    assert mine["loaded_all_steps"] is False
    assert mine["steps"]["GLOBAL"] == list(range(KILL_AT))
    assert mine["tensors"] == ours["tensors"]
