"""A Keras script without hook code gets the hook from SageMaker's debughookconfig.json: through
``python -m sdk_ext.keras.run`` or the ``.pth`` line, on the torch and the TensorFlow backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sdk_ext.modes import ModeKeys
from sdk_ext.trials import create_trial
from tests.functional.keras.conftest import REPO, backend_of, require, subprocess_env

SCRIPT = Path(__file__).with_name("plain_fit.py")
PTH_LINE = "import sdk_ext.keras.zero_change as z; z.install()"


def write_config(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "tensors"
    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({
        "S3OutputPath": "s3://bucket/prefix",
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "2"},
        "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"},
                                     {"CollectionName": "losses"},
                                     {"CollectionName": "relu_output",
                                      "CollectionParameters": {"include_regex": ".*relu_output"}}],
    }))
    return config, out


def run(cmd: list[str], backend: str, config: Path) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(backend)
    env["SMDEBUG_CONFIG_FILE_PATH"] = str(config)
    env.pop("TRAINING_JOB_NAME", None)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "done" in proc.stdout
    return proc


def check_trial(out: Path) -> None:
    trial = create_trial(str(out))
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 2, 4, 6, 8, 10]  # 48 training samples / 16 x 4 epochs = 12
    names = set(trial.tensor_names())
    assert {"dense/weights/dense/kernel:0", "gradients/dense/kernelGrad", "dense/relu_output", "loss",
            "val_loss"} <= names
    assert (out / "training_job_end.ts").exists()  # closed at exit


@pytest.mark.slow
@pytest.mark.parametrize("label", ["torch", "tensorflow"])
def test_run_module_gives_a_plain_keras_script_the_hook(tmp_path: Path, label: str) -> None:
    require("keras")
    require(backend_of(label) if label != "torch" else "keras")
    config, out = write_config(tmp_path)
    proc = run([sys.executable, "-m", "sdk_ext.keras.run", str(SCRIPT), "4"], backend_of(label), config)
    assert "Keras hook will be created from" in proc.stderr
    assert "hook failed" not in proc.stderr  # fit's validation evaluate() gets Keras's CallbackList: left alone
    check_trial(out)


@pytest.mark.slow
def test_the_pth_line_gives_python_script_the_hook_and_a_scripts_own_hook_is_the_same(tmp_path: Path) -> None:
    require("keras")
    config, out = write_config(tmp_path)
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "sdk_ext_keras_hook.pth").write_text(PTH_LINE + "\n")
    # site.addsitedir runs the .pth lines as interpreter start-up does; then the script runs as `python script`
    code = (f"import site, sys, runpy; site.addsitedir({str(site_dir)!r}); sys.argv = [{str(SCRIPT)!r}, '4', "
            f"'own-hook']; runpy.run_path({str(SCRIPT)!r}, run_name='__main__')")
    run([sys.executable, "-c", code], "torch", config)
    check_trial(out)
    index = sorted(p.name for p in (out / "index").rglob("*.json"))
    assert len(index) == len(set(index))  # one writer: no step written twice


def test_install_without_a_config_arms_nothing_and_does_not_import_keras(tmp_path: Path) -> None:
    code = ("import sys; import sdk_ext.keras.zero_change as z; "
            f"print(z.install({str(tmp_path / 'absent.json')!r}), 'keras' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=subprocess_env("torch"), capture_output=True,
                          text=True, timeout=120, check=True)
    assert proc.stdout.split() == ["False", "False"]


def test_install_with_a_config_waits_for_the_scripts_keras_import(tmp_path: Path) -> None:
    """The .pth line runs before the script chose KERAS_BACKEND: install must not import keras itself."""
    config, _ = write_config(tmp_path)
    code = ("import sys; import sdk_ext.keras.zero_change as z; "
            f"print(z.install({str(config)!r}), 'keras' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=subprocess_env("torch"), capture_output=True,
                          text=True, timeout=120, check=True)
    assert proc.stdout.split() == ["True", "False"]
