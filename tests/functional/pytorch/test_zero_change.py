"""A script without hook code gets a hook when SageMaker's debughookconfig.json is present."""

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch import nn

from sdk_ext.pytorch import zero_change
from tests.functional.pytorch.models import Net, batches, train
from tests.trial_dump import dump_with_format

SCRIPT = Path(__file__).with_name("plain_train.py")


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "sdk_ext.pytorch.run", str(SCRIPT), *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_the_json_config_alone_gives_the_script_a_hook(tmp_path: Path, repo_env: dict[str, str]) -> None:
    out = tmp_path / "tensors"
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({
        "S3OutputPath": "s3://bucket/prefix",
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"},
                                     {"CollectionName": "losses"}],
    }))
    env = dict(repo_env, SMDEBUG_CONFIG_FILE_PATH=str(config))
    env.pop("TRAINING_JOB_NAME", None)
    proc = run(["5"], env)
    assert "done" in proc.stdout
    assert "hook will be created from" in proc.stderr  # the script configured no logging; we still speak
    dump = dump_with_format(out)
    assert dump["steps"]["GLOBAL"] == [0, 2, 4]
    assert set(dump["tensor_names"]) == {
        "Net_fc1.weight", "Net_fc2.weight", "gradient/Net_fc1.weight", "gradient/Net_fc2.weight",
        "gradient/Net_fc1.bias", "gradient/Net_fc2.bias", "CrossEntropyLoss_output_0",
    }
    assert (out / "training_job_end.ts").exists()  # closed at exit


@pytest.fixture
def clean_state() -> Iterator[None]:
    yield
    zero_change.uninstall()


def test_without_a_config_or_with_use_smdebug_false_nothing_is_armed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_state: None
) -> None:
    assert zero_change.install(str(tmp_path / "absent.json")) is False
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({"LocalPath": str(tmp_path / "tensors")}))
    monkeypatch.setenv("USE_SMDEBUG", "false")
    assert zero_change.install(str(config)) is False
    assert zero_change.get_hook(str(config), create_if_not_exists=True) is None


def test_a_bad_config_is_logged_and_training_runs_without_the_hook(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, clean_state: None
) -> None:
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({"LocalPath": str(tmp_path / "tensors"), "HookParameters": {"save_interval": "0"}}))
    assert zero_change.install(str(config)) is True
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    train(model, loss_fn, batches(2))
    assert "save_interval must be a positive integer" in caplog.text
    assert not (tmp_path / "tensors").exists()
    assert zero_change._state["handle"] is None  # the global pre-hook removed itself


# --- one hook per process: zero-change path + a hook asked for in the script ------------------------------

EXPLICIT = Path(__file__).with_name("explicit_train.py")
STEPS = 6


def _job(tmp: Path, name: str, env: dict[str, str], script: Path, args: list[str], *, zero_change: bool) -> tuple[Path, str]:
    """Run one training job with its own config and trial; (trial dir, stdout)."""
    out = tmp / name / "tensors"
    config = tmp / name / "debughookconfig.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"},
                                     {"CollectionName": "losses"}],
    }))
    job_env = dict(env, SMDEBUG_CONFIG_FILE_PATH=str(config))
    job_env.pop("TRAINING_JOB_NAME", None)
    launcher = [sys.executable, "-m", "sdk_ext.pytorch.run"] if zero_change else [sys.executable]
    proc = subprocess.run([*launcher, str(script), str(STEPS), *args], env=job_env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "a second sdk_ext hook" not in proc.stderr
    return out, proc.stdout


def _files(trial: Path) -> dict[str, bytes | None]:
    """Every file of the trial; the bytes of those without wall times (index and collections files; an
    index file without its checksums, which cover the event file and so its wall times)."""
    from sdk_ext.format import checksums

    files: dict[str, bytes | None] = {}
    for path in sorted(p for p in trial.rglob("*") if p.is_file()):
        key = path.relative_to(trial).as_posix()
        if key.endswith(".tfevents") or key.startswith("consolidated/"):  # (the latter holds the checksums too)
            files[key] = None
        else:
            files[key] = checksums.strip(path.read_bytes()) if key.startswith("index/") else path.read_bytes()
    return files


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, bytes | None], dict[str, object]]]:
    """The trial of the zero-change path alone and of the explicit hook alone."""
    from tests.conftest import REPO

    env = dict(__import__("os").environ, PYTHONPATH=str(REPO))
    tmp = tmp_path_factory.mktemp("alone")
    zero, _ = _job(tmp, "zero", env, SCRIPT, [], zero_change=True)
    explicit, stdout = _job(tmp, "explicit", env, EXPLICIT, ["create"], zero_change=False)
    assert "sdk_ext hooks in this process: 1; disabled: False" in stdout
    return {"zero": (_files(zero), dump_with_format(zero)), "explicit": (_files(explicit), dump_with_format(explicit))}


@pytest.mark.parametrize("api, when", [("create", "early"), ("get_hook", "early"), ("create", "late"),
                                        ("get_hook", "late")])
def test_a_script_asking_for_the_hook_under_zero_change_shares_the_one_hook(
    api: str, when: str, alone: dict[str, tuple[dict[str, bytes | None], dict[str, object]]], tmp_path: Path,
    repo_env: dict[str, str],
) -> None:
    """Hook.create_from_json_file() / get_hook(create_if_not_exists=True) under `python -m sdk_ext.pytorch.run`:
    before the first forward (the script's hook is the one) or after it (the zero-change hook is returned);
    one hook either way, and the trial holds what either path alone writes."""
    args = [api] + (["late"] if when == "late" else [])
    trial, stdout = _job(tmp_path, "both", repo_env, EXPLICIT, args, zero_change=True)
    assert "sdk_ext hooks in this process: 1; disabled: False" in stdout
    files, dump = _files(trial), dump_with_format(trial)
    zero_files, zero_dump = alone["zero"]
    assert files == zero_files and dump == zero_dump
    if when == "early":  # the explicit hook alone sees the same steps (the late one alone would miss step 0)
        assert (files, dump) == alone["explicit"]
    assert dump["steps"]["GLOBAL"] == [0, 2, 4]


def test_create_from_json_file_returns_the_process_hook_for_the_same_config(tmp_path: Path) -> None:
    from sdk_ext.pytorch import Hook

    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({"LocalPath": str(tmp_path / "tensors")}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"LocalPath": str(tmp_path / "other")}))
    try:
        hook = Hook.create_from_json_file(str(config))
        assert Hook.create_from_json_file(str(config)) is hook
        assert zero_change.get_hook() is hook and zero_change.get_hook(str(config), create_if_not_exists=True) is hook
        second = Hook.create_from_json_file(str(other))  # another config: another hook, now the process's
        assert second is not hook and zero_change.get_hook() is second
        second.close()
        assert zero_change.get_hook() is None  # a closed hook is nobody's hook
        third = Hook.create_from_json_file(str(config))
        assert third is not hook  # the first was replaced as the process's hook; a fresh one is made
    finally:
        zero_change.uninstall()


def test_register_module_twice_with_the_same_model_is_a_no_op(tmp_path: Path, clean_state: None) -> None:
    from sdk_ext.pytorch import Hook, SaveConfig

    hook = Hook(tmp_path / "t", include_collections=["weights"], save_config=SaveConfig(save_interval=1))
    model = Net()
    hook.register_module(model)
    hook.register_module(model)
    train(model, nn.CrossEntropyLoss(), batches(2))
    assert not hook.disabled and len(model._forward_pre_hooks) == 1
    hook.register_module(Net())  # another model: refused, the hook is disabled, training goes on
    assert hook.disabled and "watches a Net already" in str(hook.failure)
    hook.close()
