"""On the JAX backend the hook says at construction what it cannot capture there (fit never calls
optimizer.apply; layers run traced). JAX is not installed here: the backend name is faked, the message and
the hook's behaviour (no optimizer or layer wrapping) are real."""

from __future__ import annotations

import subprocess
import sys

from tests.functional.keras.conftest import REPO, require, subprocess_env

CODE = """
import logging, tempfile
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
import keras
from sdk_ext.keras import capture
capture.backend_name = lambda: "jax"
from sdk_ext.keras import KerasHook
hook = KerasHook(tempfile.mkdtemp(), include_collections=["gradients", "layers"])
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="relu")])
model.compile(optimizer="sgd", loss="mse")
hook.set_model(model)
print("apply wrapped:", "apply" in vars(model.optimizer), "call wrapped:", "call" in vars(model.layers[0]))
"""


def test_the_jax_backend_is_told_what_is_not_captured_at_construction() -> None:
    require("keras")
    proc = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, env=subprocess_env("torch"), capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "JAX backend" in proc.stderr and "gradients and layer inputs/outputs are NOT" in proc.stderr
    assert "apply wrapped: False call wrapped: False" in proc.stdout
