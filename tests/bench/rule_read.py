"""Benchmark: a built-in rule reading a wide trial live through the trial path, sdk_ext vs smdebug 1.0.34 vs raw.

Run from the repo root (``make bench`` sets SMDEBUG_PYTHON):

    SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.rule_read [--scale 0.1] [--repeat 3] [--write-md]

Issue 17 item 7: the rule evaluator reads through the same trial path as an analysis, so the wide shape
of trial_read (1000 steps x 1000 float32 tensors of 100 elements; a save-all trial of a real model) is
evaluated here by VanishingGradient over all gradients: at every step, ``reduction_value(step, "mean",
abs=True)`` of each of the 1000 tensors of the ``gradients`` collection (none vanishes, so every step is
read), until the end of training. The trial is finished (end marker), generated once with sdk_ext.format
(byte-identical to smdebug's writer); ``--scale`` multiplies its steps. Each reader runs ``--repeat``
times, interleaved, in a fresh process on a warm page cache; the best run counts:

* ``sdk_ext``: the built-in ``VanishingGradient`` with ``sdk_ext.rules.invoke_rule``;
* ``smdebug``: smdebug 1.0.34's ``invoke_rule`` with the same decision as a custom rule (SageMaker's
  built-in rule code was never published), with ``SMDEBUG_TRAINING_END_DELAY_REFRESH=0`` so that its
  1 s end-of-training sleep is not counted;
* ``raw``: list the trial and read every index and event file whole (no decoding): the I/O floor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.format.collection_file import CollectionSpec
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from tests.bench._markdown import write_section
from tests.trial_builder import DEFAULT_COLLECTIONS, TrialBuilder

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_rule_read_worker.py")
RAW_WORKER = Path(__file__).with_name("_trial_read_worker.py")
STEPS, TENSORS, SHAPE = 1000, 1000, (100,)


def generate(root: Path, steps: int) -> Path:
    """The wide trial with ``steps`` steps under ``root`` (reused if already complete)."""
    out = root / f"wide-gradients-{steps}"
    stamp = out / ".generated"
    if stamp.exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    names = [f"gradient/layer_{i:04d}.weight" for i in range(TENSORS)]
    builder = TrialBuilder(LocalStorage(out))
    specs = dict(DEFAULT_COLLECTIONS, gradients=CollectionSpec(name="gradients", tensor_names=tuple(names)))
    builder.collections(specs=specs)
    rng = np.random.default_rng(0)
    pool = rng.standard_normal((8, *SHAPE), dtype=np.float32)  # mean |g| ~0.8: nothing vanishes
    started = time.perf_counter()
    for step in range(steps):
        builder.step(step, mode=ModeKeys.TRAIN, mode_step=step,
                     tensors={n: pool[(step + k) % len(pool)] for k, n in enumerate(names)})
    builder.end()
    stamp.write_text("done")
    print(f"generated {steps} x {TENSORS} trial in {time.perf_counter() - started:.1f} s at {out}", file=sys.stderr)
    return out


def run(reader: str, trial: Path, python: str) -> dict[str, Any]:
    env = dict(os.environ, SDK_EXT_LOG_LEVEL="WARNING")
    if reader == "smdebug":
        env["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
    else:
        env["PYTHONPATH"] = str(REPO)
    worker = RAW_WORKER if reader == "raw" else WORKER
    done = subprocess.run([python, str(worker), reader, str(trial)], capture_output=True, text=True, env=env,
                          check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{reader} failed on {trial}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure(trial: Path, repeat: int, smdebug: str | None) -> dict[str, dict[str, Any]]:
    readers = {"raw": sys.executable, "sdk_ext": sys.executable}
    if smdebug:
        readers["smdebug"] = smdebug
    run("raw", trial, sys.executable)  # warm the page cache
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(repeat):
        for reader, python in readers.items():
            runs.setdefault(reader, []).append(run(reader, trial, python))
            print(f"{reader}: {runs[reader][-1]['total_s']:.3f} s", file=sys.stderr)
    best = {reader: min(r, key=lambda x: x["total_s"]) for reader, r in runs.items()}
    seen = {(r["steps"], r["gradients"]) for name, r in best.items() if name != "raw"}
    assert len(seen) == 1, f"the rules disagree on what they evaluated (steps, gradients): {seen}"
    return best


def table(best: dict[str, dict[str, Any]], steps: int, repeat: int) -> str:
    ours, raw, theirs = best["sdk_ext"], best["raw"], best.get("smdebug")
    values = ours["steps"] * ours["gradients"]
    budget = 2 * raw["total_s"] + values * 1e-6
    lines = [
        "| trial | reductions read | raw read | budget: 2x raw + 1 us/value | sdk_ext (open / rule) | / budget "
        "| us per reduction | smdebug 1.0.34 (open / rule) | us per reduction | smdebug / sdk_ext |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    sm = f"{theirs['total_s']:.2f} s ({theirs['open_s']:.2f} / {theirs['rule_s']:.2f})" if theirs else "n/a"
    sm_us = f"{theirs['total_s'] / values * 1e6:.1f}" if theirs else "n/a"
    ratio = f"**{theirs['total_s'] / ours['total_s']:.1f}x**" if theirs else "n/a"
    lines.append(
        f"| {steps} steps x {TENSORS} gradients of f32[{SHAPE[0]}] ({raw['bytes'] / 2**20:.0f} MiB, {raw['files']} "
        f"files) | {values} | {raw['total_s']:.3f} s | {budget:.3f} s "
        f"| {ours['total_s']:.3f} s ({ours['open_s']:.3f} / {ours['rule_s']:.3f}) | **{ours['total_s'] / budget:.2f}** "
        f"| {ours['total_s'] / values * 1e6:.1f} | {sm} | {sm_us} | {ratio} |"
    )
    return "\n".join(lines) + f"\n\nBest of {repeat} runs each, interleaved, fresh process per run, warm page cache."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, help="where to generate (and keep) the trial; default: a temp dir")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the trial's 1000 steps (quick runs: 0.1)")
    parser.add_argument("--write-md", action="store_true", help="update the rule_read section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    steps = max(2, round(STEPS * args.scale))
    smdebug = os.environ.get("SMDEBUG_PYTHON")
    if not smdebug:
        print("SMDEBUG_PYTHON is not set: smdebug is left out", file=sys.stderr)
    root = args.dir or Path(tempfile.mkdtemp(prefix="sdk-ext-bench-rule-"))
    try:
        best = measure(generate(root, steps), args.repeat, smdebug)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    body = (
        "## Rules: VanishingGradient read live over a wide trial (local disk)\n\n"
        f"`SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.rule_read --repeat {args.repeat}"
        f"{' --scale ' + str(args.scale) if args.scale != 1.0 else ''} --write-md` "
        f"({platform.machine()}, {os.cpu_count()} cores, shared; Python {platform.python_version()}). The rule's "
        "own loop (invoke_rule over every step until the end of training, each step's reduction of every "
        "gradient) through the trial: smdebug with SMDEBUG_TRAINING_END_DELAY_REFRESH=0.\n\n"
        + table(best, steps, args.repeat)
    )
    print(body)
    if args.write_md:
        write_section("rule_read", body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
