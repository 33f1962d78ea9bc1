"""Benchmark: open a local trial, list its tensors, read every value: sdk_ext vs smdebug 1.0.34 vs raw reads.

Run from the repo root (``make bench`` sets SMDEBUG_PYTHON):

    SMDEBUG_PYTHON=/path/to/smdebug-venv/bin/python python -m tests.bench.trial_read [--write-md]

Two trials are generated once with sdk_ext.format (byte-identical to smdebug's writer) into a temp
dir (``--dir`` keeps and reuses them): ``small`` = 2000 steps x 50 float32 tensors of 100 elements,
``large`` = 200 steps x 20 float32 tensors of 256x256 (1 GiB). Both are finished trials (end marker)
of one worker. Each reader runs ``--repeat`` times in a fresh process on a warm page cache; the best
run counts:

* ``sdk_ext``, value() per step: ``create_trial``, ``tensor_names()``, then ``tensor.value(step)`` for
  every step of every tensor (the access pattern of rules, which look at a step at a time);
* ``sdk_ext``, values() per tensor: the same, reading each tensor with ``Tensor.values()`` (smdebug's
  ``{step: value}`` call; many values per call), the way to read everything;
* ``smdebug``: the same calls on smdebug 1.0.34 (numpy 2.2.6, protobuf 3.20.3), environment as is,
  so ``SMDEBUG_TRAINING_END_DELAY_REFRESH`` has its default (1 s sleep at the first query);
* ``smdebug, delay 0``: smdebug again with ``SMDEBUG_TRAINING_END_DELAY_REFRESH=0`` (informative);
* ``raw``: list the trial directory and read every collections, index and event file whole with
  ``open().read()``: the I/O floor, no parsing or decoding.
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

from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from tests.bench._markdown import write_section
from tests.trial_builder import TrialBuilder

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_trial_read_worker.py")
SHAPES = {"small": (2000, 50, (100,)), "large": (200, 20, (256, 256))}


def generate(root: Path, kind: str) -> Path:
    """Write the ``kind`` trial under ``root`` unless a complete one is already there."""
    steps, tensors, shape = SHAPES[kind]
    out = root / kind
    stamp = out / ".generated"
    if stamp.exists() and stamp.read_text() == repr(SHAPES[kind]):
        return out
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(0)
    builder = TrialBuilder(LocalStorage(out))
    builder.collections()
    names = [f"layer_{i:02d}/weight" for i in range(tensors)]
    started = time.perf_counter()
    for step in range(steps):
        values = {n: rng.standard_normal(shape, dtype=np.float32) for n in names}
        builder.step(step, mode=ModeKeys.TRAIN, mode_step=step, tensors=values)
    builder.end()
    stamp.write_text(repr(SHAPES[kind]))
    print(f"generated {kind} trial in {time.perf_counter() - started:.1f} s at {out}", file=sys.stderr)
    return out


def run(reader: str, trial: Path, python: str) -> dict[str, Any]:
    env = dict(os.environ)
    if reader.startswith("sdk_ext") or reader == "raw":
        env["PYTHONPATH"] = str(REPO)
    if reader == "smdebug_no_delay":
        env["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
    worker_reader = "smdebug" if reader.startswith("smdebug") else reader
    done = subprocess.run(
        [python, str(WORKER), worker_reader, str(trial)], capture_output=True, text=True, env=env, check=False,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{reader} failed on {trial}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def best(results: list[dict[str, Any]]) -> dict[str, Any]:
    return min(results, key=lambda r: r["total_s"])


def versions(python: str) -> str:
    code = "import sys, numpy, google.protobuf as p; print(sys.version.split()[0], numpy.__version__, p.__version__)"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def measure(root: Path, kinds: list[str], repeat: int, smdebug: str | None) -> dict[str, dict[str, Any]]:
    readers = {"raw": sys.executable, "sdk_ext": sys.executable, "sdk_ext_values": sys.executable}
    if smdebug:
        readers["smdebug"] = smdebug
        readers["smdebug_no_delay"] = smdebug  # informative: smdebug without its end-of-training sleep
    results: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        trial = generate(root, kind)
        run("raw", trial, sys.executable)  # warm the page cache
        results[kind] = {}
        for _ in range(repeat):  # interleave readers so drift hits all alike
            for reader, python in readers.items():
                results[kind].setdefault(reader, []).append(run(reader, trial, python))
        results[kind] = {reader: best(runs) for reader, runs in results[kind].items()}
        counts = {(r["values"], r["bytes"]) for name, r in results[kind].items() if name != "raw"}
        assert len(counts) == 1, f"readers disagree on what they read: {counts}"
        print(f"{kind}: " + ", ".join(f"{k} {v['total_s']:.3f} s" for k, v in results[kind].items()), file=sys.stderr)
    return results


def _split(r: dict[str, Any]) -> str:
    return f"{r['total_s']:.3f} s ({r['open_s']:.3f} / {r['tensor_names_s']:.3f} / {r['values_s']:.3f})"


def table(results: dict[str, dict[str, Any]], repeat: int) -> str:
    rows = [
        (
            "| trial | values | raw read | sdk_ext, value() per step (open / names / values) | / raw "
            "| sdk_ext, values() per tensor (open / names / values) | / raw | smdebug 1.0.34 (open / names / values) "
            "| smdebug / sdk_ext (value() / values()) | smdebug, delay 0 |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, r in results.items():
        steps, tensors, shape = SHAPES[kind]
        loop, bulk, raw = r["sdk_ext"], r["sdk_ext_values"], r["raw"]
        sm = r.get("smdebug")
        sm_text = (
            f"{sm['total_s']:.2f} s ({sm['open_s']:.2f} / {sm['tensor_names_s']:.2f} / {sm['values_s']:.2f})" if sm else "n/a"
        )
        ratio = f"**{sm['total_s'] / loop['total_s']:.1f}x** / **{sm['total_s'] / bulk['total_s']:.1f}x**" if sm else "n/a"
        nd = r.get("smdebug_no_delay")
        nodelay = (
            f"{nd['total_s']:.2f} s ({nd['total_s'] / loop['total_s']:.1f}x / {nd['total_s'] / bulk['total_s']:.1f}x)"
            if nd else "n/a"
        )
        rows.append(
            f"| {kind}: {steps} steps x {tensors} x {'x'.join(map(str, shape))} f32 ({raw['bytes'] / 2**20:.0f} MiB, "
            f"{raw['files']} files) | {loop['values']} | {raw['total_s']:.3f} s "
            f"| {_split(loop)} | **{loop['total_s'] / raw['total_s']:.2f}x** "
            f"| {_split(bulk)} | **{bulk['total_s'] / raw['total_s']:.2f}x** "
            f"| {sm_text} | {ratio} | {nodelay} |"
        )
    return "\n".join(rows) + f"\n\nBest of {repeat} runs each, fresh process per run, warm page cache."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, help="where to generate (and keep) the trials; default: a temp dir")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=sorted(SHAPES), action="append")
    parser.add_argument("--write-md", action="store_true", help="update the trial reader section of BENCHMARKS.md")
    args = parser.parse_args(argv)
    smdebug = os.environ.get("SMDEBUG_PYTHON")
    if not smdebug:
        print("SMDEBUG_PYTHON is not set: smdebug is left out", file=sys.stderr)
    root = args.dir or Path(tempfile.mkdtemp(prefix="sdk-ext-bench-trial-"))
    try:
        results = measure(root, args.only or sorted(SHAPES, reverse=True), args.repeat, smdebug)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    body = (
        "## Trial reader: open + tensor_names + every value (local disk)\n\n"
        "`SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.trial_read --write-md` "
        f"({platform.machine()}, {os.cpu_count()} cores; sdk_ext: Python/numpy/protobuf {versions(sys.executable)}; "
        f"smdebug: {versions(smdebug) if smdebug else 'n/a'}; "
        f"SMDEBUG_TRAINING_END_DELAY_REFRESH={os.environ.get('SMDEBUG_TRAINING_END_DELAY_REFRESH', 'unset (1 s)')})\n\n"
        + table(results, args.repeat)
    )
    print(body)
    if args.write_md:
        write_section("trial_read", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
