"""One backend's Keras timing loop for tests.bench.keras_overhead (run with KERAS_BACKEND set; prints JSON).

Four identical MLPs (784-128-64-10, batch 64, SGD, graph mode on TensorFlow), each fitted for one block of
``--steps`` steps per round, configs alternating within a round: none (no callbacks), control (a second model
without callbacks: the noise floor), default (KerasHook with its defaults: losses/metrics every 500 steps)
and save_all (weights, biases and gradients every step).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import keras
import numpy as np

from sdk_ext.keras import KerasHook, SaveConfig


def model() -> keras.Model:
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((784,)), keras.layers.Dense(128, activation="relu"),
                          keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
    m.compile(optimizer=keras.optimizers.SGD(0.01),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=False)
    return m


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64 * args.steps, 784)).astype("float32")
    y = rng.integers(0, 10, size=(64 * args.steps,))
    out = tempfile.mkdtemp(prefix="keras-bench-")
    configs = {
        "none": (model(), []),
        "control": (model(), []),
        "default": (model(), [KerasHook(os.path.join(out, "default"))]),
        "save_all": (model(), [KerasHook(os.path.join(out, "save_all"), save_config=SaveConfig(save_interval=1),
                                         include_collections=["weights", "biases", "gradients"])]),
    }
    spent = {"default": 0.0, "save_all": 0.0}
    for name in spent:  # time inside the hook's per-batch callbacks (robust to the shared machine's noise)
        hook = configs[name][1][0]
        for attr in ("on_train_batch_begin", "on_train_batch_end"):
            method = getattr(hook, attr)

            def timed(*a: object, _m: object = method, _n: str = name, **k: object) -> None:
                t = time.perf_counter()
                _m(*a, **k)  # type: ignore[operator]
                spent[_n] += time.perf_counter() - t

            setattr(hook, attr, timed)
    for m, cbs in configs.values():  # compile/trace outside the timing
        m.fit(x, y, batch_size=64, epochs=1, verbose=0, callbacks=cbs)
    spent.update(default=0.0, save_all=0.0)
    times: dict[str, list[float]] = {k: [] for k in configs}
    ratios: dict[str, list[float]] = {k: [] for k in configs if k != "none"}
    order = list(configs)
    for r in range(args.rounds):
        per = {}
        for name in order[r % len(order):] + order[:r % len(order)]:  # rotate: no config always runs first
            m, cbs = configs[name]
            t0 = time.perf_counter()
            m.fit(x, y, batch_size=64, epochs=1, verbose=0, callbacks=cbs)
            per[name] = (time.perf_counter() - t0) / args.steps
            times[name].append(per[name])
        for name, values in ratios.items():
            values.append(per[name] / per["none"])
    for _, cbs in configs.values():
        for cb in cbs:
            cb.close()
    result = {"backend": keras.backend.backend(), "rounds": args.rounds, "steps": args.steps,
              "ms": {k: statistics.median(v) * 1e3 for k, v in times.items()},
              "overhead": {k: (statistics.median(v) - 1) * 100 for k, v in ratios.items()},
              "hook_us": {k: v / (args.rounds * args.steps) * 1e6 for k, v in spent.items()}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
