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
