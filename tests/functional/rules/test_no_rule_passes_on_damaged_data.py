"""No rule passes on damaged data: a trial with a NaN at step 15, that step's data damaged.

Each damage is made the way a user meets it (a file cut short by a full disk or a killed copy, emptied,
deleted, an index file edited or hit by a flipped bit). ExplodingTensor must not end NoIssuesFound: the
reader raises a DamagedDataError naming the file, invoke_rule lets it through with the step, and the
rule evaluator (behind ``sdk-ext rules`` and every local job) ends the rule in Error saying what it
could not read. The same holds for a trial written as smdebug writes it (no checksums), once training
has ended.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import DamagedDataError, RuleEvaluationConditionMet, TensorUnavailableForStep
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.modes import ModeKeys
from sdk_ext.rules import invoke_rule
from sdk_ext.rules.builtin import get_builtin_rule
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import create_trial
from tests.trial_builder import TrialBuilder

NAN_STEP = 15
STEPS = 20
EVENT = f"events/{NAN_STEP:012d}/{NAN_STEP:012d}_worker_0.tfevents"
INDEX = f"index/000000000/{NAN_STEP:012d}_worker_0.json"


def gradient(step: int) -> np.ndarray:
    g = np.linspace(-1, 1, 64, dtype=np.float32) / (step + 1)
    if step == NAN_STEP:
        g[7] = np.nan
    return g


def hook_trial(out: Path) -> Path:
    """Written by sdk_ext's hook (index files with checksums); no consolidated index, so each damaged
    index file is read as it is on disk."""
    hook = Hook(out, save_config=SaveConfig(save_interval=1), include_collections=["gradients", "losses"])
    hook.set_mode(ModeKeys.TRAIN)
    for step in range(STEPS):
        with hook.step():
            hook.save_tensor("gradient/fc.weight", gradient(step), collections_to_write="gradients")
            hook.save_tensor("loss", np.float32(1.0 / (step + 1)), collections_to_write="losses")
    hook.close()
    assert hook.failure is None
    for summary in (out / "consolidated").glob("*"):
        summary.unlink()
    return out


def smdebug_like_trial(out: Path) -> Path:
    """Written as smdebug writes it: no checksums, no consolidated index, ended."""
    builder = TrialBuilder(LocalStorage(out))
    builder.collections()
    for step in range(STEPS):
        builder.step(step, mode=ModeKeys.TRAIN, mode_step=step,
                     tensors={"gradient/fc.weight": gradient(step), "loss": np.array([1.0 / (step + 1)], np.float32)})
    builder.end()
    return out


def truncate(root: Path) -> None:  # inside the first record (records wholly before the cut read back exactly)
    path = root / EVENT
    path.write_bytes(path.read_bytes()[:40])


def empty(root: Path) -> None:
    (root / EVENT).write_bytes(b"")


def delete(root: Path) -> None:
    (root / EVENT).unlink()


def garbage_index(root: Path) -> None:
    path = root / INDEX
    path.write_bytes(path.read_bytes()[:-20] + b"\x00" * 5)


def flip_index_bit(root: Path) -> None:  # a digit of the record offsets: still valid JSON
    path = root / INDEX
    data = bytearray(path.read_bytes())
    at = data.index(b'"start_idx": ') + len(b'"start_idx": ')
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def rename_tensor_payload(root: Path) -> None:  # the key smdebug's reader looks for, one letter off
    path = root / INDEX
    path.write_bytes(path.read_bytes().replace(b'"tensor_payload"', b'"tensor_paylaad"'))


def huge_length(root: Path) -> None:
    path = root / INDEX
    doc = json.loads(path.read_bytes())
    doc["tensor_payload"][0]["length"] = 2**39
    path.write_bytes(json.dumps(doc).encode())


DAMAGE: dict[str, Callable[[Path], None]] = {
    "event file truncated": truncate,
    "event file emptied": empty,
    "event file deleted": delete,
    "index file garbled": garbage_index,
    "index file bit flip": flip_index_bit,
    "index tensor_payload key damaged": rename_tensor_payload,
    "index length 2**39": huge_length,
}
DAMAGED_FILE = {"event file truncated": EVENT, "event file emptied": EVENT, "event file deleted": EVENT}


def exploding_tensor(root: Path) -> object:
    return get_builtin_rule("ExplodingTensor")(create_trial(str(root), timeout=0))


def test_the_undamaged_trials_fire_at_the_nan(tmp_path: Path) -> None:
    for trial in (hook_trial(tmp_path / "hook"), smdebug_like_trial(tmp_path / "smdebug")):
        with pytest.raises(RuleEvaluationConditionMet) as fired:
            invoke_rule(exploding_tensor(trial), raise_eval_cond=True)  # type: ignore[arg-type]
        assert fired.value.step == NAN_STEP


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_invoke_rule_stops_with_the_damage_at_the_nan_step(tmp_path: Path, damage: str) -> None:
    root = hook_trial(tmp_path / "trial")
    DAMAGE[damage](root)
    with pytest.raises(DamagedDataError) as err:
        invoke_rule(exploding_tensor(root), raise_eval_cond=True)  # type: ignore[arg-type]
    assert not isinstance(err.value, TensorUnavailableForStep)
    assert err.value.step == NAN_STEP
    assert DAMAGED_FILE.get(damage, INDEX) in str(err.value)


@pytest.mark.parametrize("damage", ["event file truncated", "event file emptied", "event file deleted",
                                    "index file garbled", "index tensor_payload key damaged", "index length 2**39"])
def test_a_trial_written_as_smdebug_writes_it_is_damaged_too_once_training_ended(tmp_path: Path, damage: str) -> None:
    root = smdebug_like_trial(tmp_path / "trial")
    DAMAGE[damage](root)
    with pytest.raises(DamagedDataError) as err:
        invoke_rule(exploding_tensor(root), raise_eval_cond=True)  # type: ignore[arg-type]
    assert err.value.step == NAN_STEP
    file = EVENT if damage.startswith("event") or damage == "index length 2**39" else INDEX
    assert file in str(err.value)


def test_a_damaged_step_is_not_jumped_over_after_unsaved_steps(tmp_path: Path) -> None:
    """invoke_rule crosses runs of unsaved steps in one jump; a damaged step is never jumped over."""
    builder = TrialBuilder(LocalStorage(tmp_path))
    builder.collections()
    for step in (0, 10, 15, 20):
        builder.step(step, tensors={"gradient/fc.weight": gradient(step)})
    builder.end()
    garbage_index(tmp_path)
    with pytest.raises(DamagedDataError) as err:
        invoke_rule(exploding_tensor(tmp_path), raise_eval_cond=True)  # type: ignore[arg-type]
    assert err.value.step == NAN_STEP


@pytest.mark.parametrize("damage", ["event file deleted", "index file bit flip"])
def test_the_rule_evaluator_ends_the_rule_in_error_naming_the_file(tmp_path: Path, damage: str, repo_env) -> None:
    root = hook_trial(tmp_path / "trial")
    DAMAGE[damage](root)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "rules/evaluate.py", "--trial-dir", str(root), "--rule-name", "ExplodingTensor",
         "--output-dir", str(out), "--poll-interval", "0.1"],
        env=repo_env, capture_output=True, text=True, timeout=120, check=False,
        cwd=Path(__file__).resolve().parents[3],
    )
    status = json.loads(next(out.rglob("status.json")).read_text())
    assert status["RuleEvaluationStatus"] == "Error", (status, done.stderr[-2000:])
    assert "DamagedData" in status["StatusDetails"] and f"step {NAN_STEP}" in status["StatusDetails"]
    assert DAMAGED_FILE.get(damage, INDEX) in status["StatusDetails"]
    assert done.returncode == 2


def test_sdk_ext_rules_reports_the_error_not_a_pass(tmp_path: Path, repo_env) -> None:
    root = hook_trial(tmp_path / "trial")
    truncate(root)
    done = subprocess.run([sys.executable, "-m", "sdk_ext.cli", "rules", str(root), "--rule", "ExplodingTensor"],
                          env=repo_env, capture_output=True, text=True, timeout=120, check=False)
    assert "ExplodingTensor: Error" in done.stdout, done.stdout + done.stderr
    assert EVENT in done.stdout and "NoIssuesFound" not in done.stdout
    assert done.returncode == 2
