"""Training runs that write Keras hook trials, one backend per process (Keras picks its backend at import).

    KERAS_BACKEND=tensorflow python -m tests.functional.keras.scenarios SPEC.json

SPEC.json lists the runs (all of one backend: importing TensorFlow takes seconds, so a process runs many).
Each writes ``OUT/trial`` and ``OUT/result.json`` (what the test needs to know about the
run: learning rate, the hook's failure, which capture path ran). Imports keras, so never import this module
from a test process; tests run it with ``python -m``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

LR = 0.05


def data(n: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype("float32")
    y = (x @ rng.normal(size=(6, 1)) + 0.1).astype("float32")
    return x, y


def mlp(keras: Any, activation: str = "relu", kernel_initializer: Any = "glorot_uniform") -> Any:
    keras.utils.set_random_seed(3)
    return keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(8, activation=activation, kernel_initializer=kernel_initializer),
            keras.layers.Dense(4, activation="tanh"),
            keras.layers.Dense(1),
        ]
    )


def compile_for(model: Any, keras: Any, mode: str) -> None:
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse", metrics=["mae"],
                  run_eagerly=mode == "eager", jit_compile=mode == "jit")


def fit(out: Path, mode: str, collections: list[str], interval: int = 1, grad_interval: str | None = None
        ) -> dict[str, Any]:
    """fit with validation, then evaluate and predict, all into one trial."""
    import keras

    from sdk_ext.keras import KerasHook, SaveConfig

    x, y = data()
    model = mlp(keras)
    compile_for(model, keras, mode)
    hook = KerasHook(str(out / "trial"), save_config=SaveConfig(save_interval=interval), include_collections=collections)
    if grad_interval:
        hook.get_collection("gradients").save_config = SaveConfig(save_interval=int(grad_interval))
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, validation_data=data(32, seed=1), callbacks=[hook])
    model.evaluate(x[:32], y[:32], batch_size=16, verbose=0, callbacks=[hook])
    model.predict(x[:16], batch_size=8, verbose=0, callbacks=[hook])
    hook.close()
    from sdk_ext.keras import names

    stash = {names.gradient_name(names.variable_key(v, model.name)): np.asarray(s.numpy()).tolist()
             for v, s in hook.tap.stashed()}
    return {"lr": LR, "failure": repr(hook.failure), "graph_stash": hook.tap.graph_used, "stash": stash,
            "model_run_eagerly": model.run_eagerly, "eager_steps": hook.eager_steps}


def fit_broken(out: Path, mode: str) -> dict[str, Any]:
    """The hook's writing fails at the first saved tensor: fit must finish, and the hook says why it stopped."""
    import keras

    from sdk_ext.keras import KerasHook, SaveConfig

    x, y = data()
    model = mlp(keras)
    compile_for(model, keras, mode)
    hook = KerasHook(str(out / "trial"), save_config=SaveConfig(save_interval=1),
                     include_collections=["weights", "gradients", "layers"])

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    hook._write = broken  # type: ignore[method-assign]
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, validation_data=data(32, seed=1), callbacks=[hook])
    model.predict(x[:16], batch_size=8, verbose=0, callbacks=[hook])
    hook.close()
    return {"failure": repr(hook.failure), "epochs": len(history.history["loss"]), "disabled": hook.disabled}


def custom_tf(out: Path, mode: str) -> dict[str, Any]:
    """A TensorFlow custom loop: wrap_tape (eager) or wrap_optimizer inside tf.function (graph)."""
    import keras
    import tensorflow as tf

    from sdk_ext.tensorflow import KerasHook, SaveConfig  # smdebug's import path: smdebug.tensorflow

    x, y = data()
    model = mlp(keras)
    opt = keras.optimizers.SGD(LR)
    hook = KerasHook(str(out / "trial"), save_config=SaveConfig(save_interval=1),
                     include_collections=["weights", "biases", "gradients", "losses"])
    hook.wrap_optimizer(opt)
    if mode != "graph":
        hook.register_model(model)  # the graph loop relies on the naming without a model
    loss_fn = keras.losses.MeanSquaredError()

    if mode == "tape":
        for i in range(0, 64, 16):
            with hook.wrap_tape(tf.GradientTape()) as tape:
                loss = loss_fn(y[i:i + 16], model(x[i:i + 16], training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply(grads, model.trainable_variables)  # wrapped too: its gradients are not saved twice
    else:
        @tf.function(jit_compile=mode == "graph-jit")
        def train_step(xb: Any, yb: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply(grads, model.trainable_variables)
            return loss

        for i in range(0, 64, 16):
            with hook.step():
                loss = train_step(x[i:i + 16], y[i:i + 16])
                hook.save_scalar("batch_loss", float(loss))
                hook.save_tensor("loss", loss, collections_to_write="losses")
                hook.save_weights(model.trainable_variables)
    hook.close()
    return {"lr": LR, "failure": repr(hook.failure), "graph_stash": hook.tap.graph_used}


def custom_torch(out: Path) -> dict[str, Any]:
    """A torch-backend custom loop: torch autograd, hook.save_gradients, the Keras optimizer's apply."""
    import keras
    import torch

    from sdk_ext.keras import KerasHook, SaveConfig

    x, y = data()
    model = mlp(keras)
    opt = keras.optimizers.SGD(LR)
    opt.build(model.trainable_variables)
    hook = KerasHook(str(out / "trial"), save_config=SaveConfig(save_interval=1),
                     include_collections=["weights", "biases", "gradients", "losses"])
    for i in range(0, 64, 16):
        with hook.step():
            model.zero_grad()
            pred = model(torch.from_numpy(x[i:i + 16]), training=True)
            loss = torch.mean((pred - torch.from_numpy(y[i:i + 16])) ** 2)
            loss.backward()
            variables = model.trainable_variables
            grads = [v.value.grad for v in variables]
            hook.save_gradients(grads, variables)
            with torch.no_grad():
                opt.apply(grads, variables)
            hook.save_weights(variables)
            hook.save_tensor("loss", loss, collections_to_write="losses")
    hook.close()
    return {"lr": LR, "failure": repr(hook.failure), "graph_stash": False}


def rules_fit(out: Path, mode: str, case: str) -> dict[str, Any]:
    """Runs whose layer outputs make the activation rules fire (dead, saturated) or stay quiet (healthy)."""
    import keras

    from sdk_ext.keras import KerasHook, SaveConfig

    x, y = data(128)
    keras.utils.set_random_seed(5)
    first: dict[str, Any] = {}
    tanh: dict[str, Any] = {}
    if case == "dead":  # a bias of -50 before the ReLU layer: it (and the ReLU after it) never activates
        first = {"bias_initializer": keras.initializers.Constant(-50.0)}
    elif case == "saturated":  # huge weights push the tanh inputs deep into the flat tails
        tanh = {"kernel_initializer": keras.initializers.Constant(40.0),
                "bias_initializer": keras.initializers.Constant(40.0)}
    model = keras.Sequential([
        keras.Input((6,)),
        keras.layers.Dense(16, **first),                      # dense (linear)
        keras.layers.ReLU(),                                   # re_lu
        keras.layers.Dense(8, activation="relu"),              # dense_1
        keras.layers.Dense(8, activation="tanh", **tanh),      # dense_2
        keras.layers.Activation("sigmoid"),                    # activation
        keras.layers.Dense(1),                                 # dense_3
    ])
    compile_for(model, keras, mode)
    hook = KerasHook(str(out / "trial"), save_config=SaveConfig(save_interval=2),
                     include_collections=["layers", "gradients", "weights"])
    model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[hook])
    hook.close()
    return {"failure": repr(hook.failure)}


def run_one(scenario: str, out: Path, params: dict[str, str]) -> dict[str, Any]:
    import keras

    keras.backend.clear_session()  # layer names start again at dense, dense_1...
    out.mkdir(parents=True, exist_ok=True)
    kind, _, mode = scenario.partition(":")
    if kind == "fit":
        collections = params.get("collections", "weights,biases,gradients").split(",")
        result = fit(out, mode, collections, int(params.get("interval", "1")), params.get("grad_interval"))
    elif kind == "fit-broken":
        result = fit_broken(out, mode)
    elif kind == "custom-tf":
        result = custom_tf(out, mode)
    elif kind == "custom-torch":
        result = custom_torch(out)
    elif kind == "rules":
        mode, _, case = mode.partition(":")
        result = rules_fit(out, mode, case)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    result["backend"] = keras.backend.backend()
    (out / "result.json").write_text(json.dumps(result))
    return result


def main(argv: list[str]) -> None:
    """``scenarios.py SPEC.json``: a list of ``{"scenario", "out", "params"}``, run in order in this process."""
    for spec in json.loads(Path(argv[0]).read_text()):
        run_one(spec["scenario"], Path(spec["out"]), spec.get("params", {}))


if __name__ == "__main__":
    main(sys.argv[1:])
