"""smdebug-style Keras custom training loops on the TensorFlow backend, run in a subprocess (Keras fixes its
backend at import) by tests/compat/test_keras_custom_loops.py:

    KERAS_BACKEND=tensorflow python -m tests.compat.keras_custom_loops OUT_DIR

Each loop is written as smdebug's examples/tensorflow2/scripts write it, with the import prefix changed.
Writes ``OUT_DIR/<loop>/trial`` and ``OUT_DIR/result.json``: what the test must compare against (the
losses the loop computed, the batches it fed, the hook's warnings).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def data(n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 8)).astype("float32"), rng.integers(0, 3, n)


def model_with_dropout(keras: Any) -> Any:
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(6, activation="relu"),
                             keras.layers.Dropout(0.2), keras.layers.Dense(3)])


def tape_loop(out: Path, *, register: bool, wrap_optimizer: bool, collections: list[str]) -> dict[str, Any]:
    """smdebug's tf_keras_gradienttape.py / tf_save_metrics_gradient_tape.py loop, four batches."""
    import keras
    import tensorflow as tf

    import sdk_ext.tensorflow as smd

    keras.backend.clear_session()
    warnings = Warnings()
    logging.getLogger("sdk_ext").addHandler(warnings)
    model = model_with_dropout(keras)
    hook = smd.KerasHook(out_dir=str(out / "trial"), include_collections=collections,
                         save_config=smd.SaveConfig(save_interval=1))
    opt = keras.optimizers.Adam()
    if wrap_optimizer:
        hook.wrap_optimizer(opt)
    if register:
        hook.register_model(model)
    x, y = data()
    cce = keras.losses.CategoricalCrossentropy(from_logits=True)
    hook.save_scalar("num_training_samples", len(x), sm_metric=True)  # before the first step
    losses, logits_seen = [], []
    for i in range(4):
        xb, yb = x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]
        labels = tf.one_hot(yb, depth=3)
        with hook.wrap_tape(tf.GradientTape()) as tape:
            logits = model(xb, training=True)
            loss_value = cce(labels, logits)
        hook.save_tensor("y_labels", labels, "outputs")
        grads = tape.gradient(loss_value, model.variables)  # the example's model.variables: RNG state included
        opt.apply_gradients(zip(grads, model.variables))
        losses.append(float(loss_value))
        logits_seen.append(np.asarray(logits).tolist())
    hook.close()
    logging.getLogger("sdk_ext").removeHandler(warnings)
    return {"losses": losses, "logits": logits_seen, "failure": repr(hook.failure), "warnings": warnings.messages,
            "model_weights": sorted(v.path for v in model.weights)}


def fit_run(out: Path) -> dict[str, Any]:
    """smdebug's tf_keras_fit_eager.py on the same model: scalars before and after fit; the weights must be
    named and chosen as on the tape path."""
    import keras

    import sdk_ext.tensorflow as smd

    keras.backend.clear_session()
    warnings = Warnings()
    logging.getLogger("sdk_ext").addHandler(warnings)
    model = model_with_dropout(keras)
    hook = smd.KerasHook(out_dir=str(out / "trial"), include_collections=["weights", "biases", "default", "custom_coll"],
                         save_config=smd.SaveConfig(save_interval=1))
    hook.save_tensor("custom_tensor_1", np.arange(10), ["custom_coll"])  # smdebug's test_save_tensors
    model.compile(optimizer=keras.optimizers.Adam(), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    x, y = data()
    hook.save_scalar("epoch", 1, sm_metric=True)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, validation_data=data(16, seed=1), callbacks=[hook])
    hook.save_scalar("batch_size", 16, sm_metric=True)
    hook.close()
    logging.getLogger("sdk_ext").removeHandler(warnings)
    return {"failure": repr(hook.failure), "warnings": warnings.messages}


def get_hook_from_config(out: Path) -> dict[str, Any]:
    """smdebug.tensorflow's get_hook("keras", create_if_not_exists=True) in a SageMaker-style container."""
    import os

    import sdk_ext.tensorflow as smd

    out.mkdir(parents=True, exist_ok=True)
    config = out / "debughookconfig.json"
    config.write_text(json.dumps({"LocalPath": str(out / "trial"), "HookParameters": {"save_interval": "1"}}))
    os.environ["SMDEBUG_CONFIG_FILE_PATH"] = str(config)
    try:
        hook = smd.get_hook("keras", create_if_not_exists=True)
        same = smd.get_hook("keras") is hook and smd.get_hook() is hook
        kind = type(hook).__name__
        smd.del_hook()
        forgotten = smd.get_hook() is None
        if hook is not None:
            hook.close()
    finally:
        del os.environ["SMDEBUG_CONFIG_FILE_PATH"]
    said = Warnings()
    logging.getLogger("sdk_ext").addHandler(said)
    session = smd.get_hook("session", create_if_not_exists=True)  # a TF1 hook: TF 2.16+ has no sessions
    logging.getLogger("sdk_ext").removeHandler(said)
    return {"kind": kind, "same": same, "forgotten": forgotten, "session": repr(session), "session_said": said.messages}


IO = ["weights", "biases", "gradients", "losses", "metrics", "inputs", "outputs", "optimizer_variables"]


def main(out: Path) -> None:
    import keras

    result = {
        "backend": keras.backend.backend(),
        "full": tape_loop(out / "full", register=True, wrap_optimizer=True, collections=IO),
        "bare": tape_loop(out / "bare", register=False, wrap_optimizer=False, collections=IO + ["layers"]),
        "fit": fit_run(out / "fit"),
        "get_hook": get_hook_from_config(out / "get_hook"),
    }
    (out / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
