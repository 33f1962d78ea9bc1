"""`sdk-ext run` runs a Keras script through sdk_ext.keras.run (zero script change), also when it imports torch
(Keras on the torch backend): the Keras launcher is chosen before the PyTorch one."""

from __future__ import annotations

from pathlib import Path

import pytest

frameworks = pytest.importorskip("sdk_ext.local.jobs.frameworks")  # sdk_ext.local's detection (merged from `local`)


@pytest.mark.parametrize(
    ("source", "launcher"),
    [
        ("import keras\n", "sdk_ext.keras.run"),
        ("import os\nos.environ['KERAS_BACKEND'] = 'torch'\nimport torch\nimport keras\n", "sdk_ext.keras.run"),
        ("import tensorflow as tf\nmodel = tf.keras.Sequential()\n", "sdk_ext.keras.run"),
        ("from keras import layers\n", "sdk_ext.keras.run"),
        ("import torch\n", "sdk_ext.pytorch.run"),
    ],
)
def test_sdk_ext_run_picks_the_keras_launcher_for_keras_scripts(tmp_path: Path, source: str, launcher: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(source)
    assert frameworks.launcher(script, None) == launcher
