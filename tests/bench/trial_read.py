"""Benchmark: open a local trial, list its tensors, read every value: sdk_ext vs smdebug 1.0.34 vs raw reads.

Run from the repo root (``make bench`` sets SMDEBUG_PYTHON):

    SMDEBUG_PYTHON=/path/to/smdebug-venv/bin/python python -m tests.bench.trial_read [--write-md]

Trials are generated once with sdk_ext.format (smdebug's bytes, plus the checksums sdk_ext's hooks
add to index files) into a temp dir (``--dir`` keeps and reuses them), all finished (end marker):

* ``small`` = 2000 steps x 50 float32 tensors of 100 elements; ``large`` = 200 steps x 20 of 256x256 (1 GiB);
* ``wide`` = 1000 steps x 1000 tensors of 100 (563 MiB; a save-all trial of a real model: the files
  do not fit the reader's file cache);
* ``workers8`` = 8 workers x 500 steps x 10 tensors of 100, ``workers64`` = 64 workers x 100 steps x 10
  tensors of 100 (every worker's value is read, in both orders: one worker's steps after another's, and
  every worker at a step, step after step, as a rule comparing workers reads: the ``*_step_workers`` readers);
* ``long`` = 50,000 steps x 10 tensors of 100 and ``long1k`` = the same with 1,000 steps (linear in steps?);
* ``huge`` = 25 steps x 20 tensors of 1M float32 (2 GB; ``values()`` against ``value()``).

``--scale F`` multiplies every shape's steps by F (at least 2 steps) for a quick run on a shared
machine; ``--only`` picks shapes. Each reader runs ``--repeat`` times in a fresh process on a warm
page cache; the best run counts:

* ``sdk_ext``, value() per step: ``create_trial``, ``tensor_names()``, then ``tensor.value(step)`` for
  every step of every tensor (the access pattern of rules, which look at a step at a time);
* ``sdk_ext``, values() per tensor: the same, reading each tensor with ``Tensor.values()`` (smdebug's
  ``{step: value}`` call; many values per call), the way to read everything;
* ``smdebug``: the same calls on smdebug 1.0.34 (numpy 2.2.6, protobuf 3.20.3), environment as is,
  so ``SMDEBUG_TRAINING_END_DELAY_REFRESH`` has its default (1 s sleep at the first query);
* ``smdebug, delay 0``: smdebug again with ``SMDEBUG_TRAINING_END_DELAY_REFRESH=0`` (informative);
* ``raw``: list the trial directory and read every collections, index and event file whole with
  ``open().read()``: the I/O floor, no parsing or decoding.

Before/after a change, in one run (sdk_ext only): ``--baseline DIR`` names a source tree of an earlier
sdk_ext (``git archive <commit> | tar -x -C DIR``); each round runs every sdk_ext reader once with that
tree and once with this one, order alternating, on the same trial files, and the section
``trial_read_baseline`` gets best (and median) after / before per reader. Both trees read the trial this
tree's generator writes (with checksums; a tree from before them ignores the extra index keys, on a
slower path), or with ``--plain-before`` the before tree reads the same trial written without checksums:
what each tree's own hooks write.
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
#: kind -> (steps, tensors per step, tensor shape, workers)
SHAPES: dict[str, tuple[int, int, tuple[int, ...], int]] = {
    "small": (2000, 50, (100,), 1),
    "large": (200, 20, (256, 256), 1),
    "wide": (1000, 1000, (100,), 1),
    "workers8": (500, 10, (100,), 8),
    "workers64": (100, 10, (100,), 64),
    "long": (50_000, 10, (100,), 1),
    "long1k": (1000, 10, (100,), 1),
    "huge": (25, 20, (1_000_000,), 1),
}
#: every shape's steps are multiplied by this (``--scale``)
SCALE = [1.0]


def shape_of(kind: str) -> tuple[int, int, tuple[int, ...], int]:
    steps, tensors, shape, workers = SHAPES[kind]
    return max(2, round(steps * SCALE[0])), tensors, shape, workers


def generate(root: Path, kind: str, *, checksums: bool = True) -> Path:
    """Write the ``kind`` trial under ``root`` unless a complete one is already there (``checksums=False``:
    smdebug's bytes exactly, as sdk_ext's hooks wrote them before they added checksums; in ``<kind>-plain``)."""
    steps, tensors, shape, workers = shape_of(kind)
    out = root / (kind if checksums else f"{kind}-plain")
    stamp = out / ".generated"
    if stamp.exists() and stamp.read_text() == repr((shape_of(kind), "checksums" if checksums else "plain")):
        return out
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(0)
    builder = TrialBuilder(LocalStorage(out), checksums=checksums)  # True: as sdk_ext's hooks write index files
    names_of_workers = [f"worker_{w}" for w in range(workers)]
    builder.collections(names_of_workers)
    names = [f"layer_{i:04d}/weight" if tensors > 100 else f"layer_{i:02d}/weight" for i in range(tensors)]
    started = time.perf_counter()
    pool = rng.standard_normal((8, *shape), dtype=np.float32)  # values cycle through a few arrays: writing is not measured
    for step in range(steps):
        for worker in names_of_workers:
            values = {n: pool[(step + k) % len(pool)] for k, n in enumerate(names)}
            builder.step(step, worker, mode=ModeKeys.TRAIN, mode_step=step, tensors=values)
    builder.end()
    stamp.write_text(repr((shape_of(kind), "checksums" if checksums else "plain")))
    print(f"generated {kind} trial in {time.perf_counter() - started:.1f} s at {out}", file=sys.stderr)
    return out


def run(reader: str, trial: Path, python: str, *, tree: Path = REPO) -> dict[str, Any]:
    env = dict(os.environ)
    if reader.startswith("sdk_ext") or reader == "raw":
        env["PYTHONPATH"] = str(tree)
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
    """The run with the least total, plus the least of each part over all runs (``min_open_s``,
    ``min_values_s``: the linear-in-steps note compares parts, and on a shared machine the run
    with the best total is not always the one with the best part)."""
    found = dict(min(results, key=lambda r: r["total_s"]))
    for part in ("open_s", "values_s"):
        if part in found:
            found["min_" + part] = min(r[part] for r in results)
    return found


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
        chosen = dict(readers)
        if shape_of(kind)[3] > 1:  # several workers: the other order too
            chosen["sdk_ext_step_workers"] = sys.executable
            if smdebug:
                chosen["smdebug_step_workers"] = smdebug
        for _ in range(repeat):  # interleave readers so drift hits all alike
            for reader, python in chosen.items():
                results[kind].setdefault(reader, []).append(run(reader, trial, python))
        results[kind] = {reader: best(runs) for reader, runs in results[kind].items()}
        counts = {(r["values"], r["bytes"]) for name, r in results[kind].items() if name != "raw"}
        assert len(counts) == 1, f"readers disagree on what they read: {counts}"
        print(f"{kind}: " + ", ".join(f"{k} {v['total_s']:.3f} s" for k, v in results[kind].items()), file=sys.stderr)
    return results


SDK_READERS = ("sdk_ext", "sdk_ext_values", "sdk_ext_step_workers")


def run_baseline(root: Path, kinds: list[str], rounds: int, baseline: Path, after: Path = REPO,
                 *, plain_before: bool = False, plain: bool = False) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """``rounds`` alternating before/after pairs of every sdk_ext reader on each trial: label -> runs.
    ``plain_before``: the before tree reads the same trial written without checksums; ``plain``: both do."""
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for kind in kinds:
        trials = {"after": generate(root, kind, checksums=not plain),
                  "before": generate(root, kind, checksums=not (plain_before or plain))}
        for trial in set(trials.values()):
            run("raw", trial, sys.executable)  # warm the page cache
        readers = [r for r in SDK_READERS if r != "sdk_ext_step_workers" or shape_of(kind)[3] > 1]
        runs = found.setdefault(kind, {})
        for i in range(rounds):
            trees = [("before", baseline), ("after", after)]
            for label, tree in trees if i % 2 == 0 else trees[::-1]:
                for reader in readers:
                    runs.setdefault(f"{label} {reader}", []).append(
                        run(reader, trials[label], sys.executable, tree=tree))
        print(f"{kind}: " + ", ".join(f"{k} {min(r['total_s'] for r in v):.3f} s" for k, v in runs.items()),
              file=sys.stderr)
    return found


def baseline_table(found: dict[str, dict[str, list[dict[str, Any]]]], rounds: int) -> str:
    import statistics

    names = {"sdk_ext": "value() per step", "sdk_ext_values": "values() per tensor",
             "sdk_ext_step_workers": "every worker at a step"}
    rows = ["| trial | reader | before: best (median) | after: best (median) | after / before: best (median) |",
            "|---|---|---|---|---|"]
    for kind, runs in found.items():
        steps, tensors, shape, workers = shape_of(kind)
        who = f"{workers} workers x " if workers > 1 else ""
        for reader in SDK_READERS:
            if f"after {reader}" not in runs:
                continue
            before = [r["total_s"] for r in runs[f"before {reader}"]]
            after = [r["total_s"] for r in runs[f"after {reader}"]]
            counts = {(r["values"], r["bytes"]) for r in runs[f"before {reader}"] + runs[f"after {reader}"]}
            assert len(counts) == 1, f"before and after disagree on what they read: {counts}"
            rows.append(
                f"| {kind}: {who}{steps} steps x {tensors} x {'x'.join(map(str, shape))} f32 | {names[reader]} "
                f"| {min(before):.3f} s ({statistics.median(before):.3f}) | {min(after):.3f} s "
                f"({statistics.median(after):.3f}) | **{min(after) / min(before):.2f}** "
                f"({statistics.median(after) / statistics.median(before):.2f}) |"
            )
    return "\n".join(rows) + (f"\n\n{rounds} rounds; each round runs every reader once per tree in a fresh process, "
                               "the trees' order alternating; warm page cache.")


def _split(r: dict[str, Any]) -> str:
    return f"{r['total_s']:.3f} s ({r['open_s']:.3f} / {r['tensor_names_s']:.3f} / {r['values_s']:.3f})"


def goal(r: dict[str, Any], raw: dict[str, Any]) -> float:
    """Issue 17's budget for reading everything: 2x the raw read plus 1 us per value returned."""
    return 2 * raw["total_s"] + r["values"] * 1e-6


def table(results: dict[str, dict[str, Any]], repeat: int) -> str:
    rows = [
        (
            "| trial | values | raw read | budget: 2x raw + 1 us/value "
            "| sdk_ext, value() per step (open / names / values) | / budget "
            "| sdk_ext, values() per tensor (open / names / values) | / budget "
            "| smdebug 1.0.34 (open / names / values) | smdebug / sdk_ext (value() / values()) | smdebug, delay 0 |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, r in results.items():
        steps, tensors, shape, workers = shape_of(kind)
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
        who = f"{workers} workers x " if workers > 1 else ""
        budget = goal(loop, raw)
        rows.append(
            f"| {kind}: {who}{steps} steps x {tensors} x {'x'.join(map(str, shape))} f32 "
            f"({raw['bytes'] / 2**20:.0f} MiB, {raw['files']} files) | {loop['values']} | {raw['total_s']:.3f} s "
            f"| {budget:.3f} s | {_split(loop)} | **{loop['total_s'] / budget:.2f}** "
            f"| {_split(bulk)} | **{bulk['total_s'] / budget:.2f}** "
            f"| {sm_text} | {ratio} | {nodelay} |"
        )
    notes = []
    if "long" in results and "long1k" in results:
        per = {k: (results[k]["sdk_ext"], results[k]["sdk_ext_values"]) for k in ("long", "long1k")}
        factor = shape_of("long")[0] / shape_of("long1k")[0]

        def ratio(reader: int, part: str) -> float:
            return float(per["long"][reader][part] / per["long1k"][reader][part])

        notes.append(
            f"Linear in steps: long / long1k = {ratio(0, 'values_s'):.1f}x (value()) and {ratio(1, 'values_s'):.1f}x "
            f"(values()) for the values, {ratio(0, 'open_s'):.1f}x to open, at {factor:.0f}x the steps (runs with the "
            f"best totals); least of each part over the runs: {ratio(0, 'min_values_s'):.1f}x, "
            f"{ratio(1, 'min_values_s'):.1f}x, {ratio(0, 'min_open_s'):.1f}x."
        )
    for kind, r in results.items():
        if "sdk_ext_step_workers" not in r:
            continue
        sw, raw, sm = r["sdk_ext_step_workers"], r["raw"], r.get("smdebug_step_workers")
        versus = f", smdebug {sm['total_s']:.2f} s (**{sm['total_s'] / sw['total_s']:.1f}x**)" if sm else ""
        notes.append(
            f"{kind}, every worker at a step, step after step: sdk_ext {_split(sw)} = **{sw['total_s'] / goal(sw, raw):.2f}"
            f"** of the budget{versus}; one worker's steps after another's (value() column): "
            f"{r['sdk_ext']['total_s'] / goal(r['sdk_ext'], raw):.2f} of the budget."
        )
    if "huge" in results:
        h = results["huge"]
        notes.append(
            f"Large tensors: values() / value() = {h['sdk_ext_values']['values_s'] / h['sdk_ext']['values_s']:.2f} "
            f"(values only)."
        )
    text = "\n".join(rows) + f"\n\nBest of {repeat} runs each, fresh process per run, warm page cache."
    return text + ("\n\n" + "\n".join(f"- {n}" for n in notes) if notes else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, help="where to generate (and keep) the trials; default: a temp dir")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=sorted(SHAPES), action="append")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every shape's steps (quick runs: 0.1)")
    parser.add_argument("--write-md", action="store_true", help="update the trial reader section of BENCHMARKS.md")
    parser.add_argument("--baseline", type=Path,
                        help="source tree of an earlier sdk_ext: before/after of the sdk_ext readers, in one run")
    parser.add_argument("--plain-before", action="store_true",
                        help="with --baseline: the before tree reads the trial written without checksums (a tree "
                             "from before them reads what its own hooks wrote)")
    parser.add_argument("--plain", action="store_true",
                        help="with --baseline: both trees read the trial written without checksums")
    parser.add_argument("--after", type=Path, default=REPO,
                        help="with --baseline: the tree measured as 'after' (default: this checkout)")
    args = parser.parse_args(argv)
    SCALE[0] = args.scale
    if args.baseline is not None:
        for flag, tree in (("--baseline", args.baseline), ("--after", args.after)):
            if not (tree / "sdk_ext" / "__init__.py").is_file():
                parser.error(f"{flag} {tree}: no sdk_ext/__init__.py there; make one with "
                             "`git archive <commit> | tar -x -C DIR`")
        root = args.dir or Path(tempfile.mkdtemp(prefix="sdk-ext-bench-trial-"))
        try:
            found = run_baseline(root, args.only or ["small", "large", "wide"], args.repeat, args.baseline.resolve(),
                                 args.after.resolve(), plain_before=args.plain_before, plain=args.plain)
        finally:
            if args.dir is None:
                shutil.rmtree(root, ignore_errors=True)
        body = (
            "### Trial reader before/after a change (sdk_ext only, one run)\n\n"
            f"Command: `git archive <before> | tar -x -C /tmp/before; python -m tests.bench.trial_read --baseline "
            f"/tmp/before{' --after ' + str(args.after) if args.after.resolve() != REPO else ''}"
            f"{' --plain-before' if args.plain_before else ''}{' --plain' if args.plain else ''} --repeat {args.repeat}{' --scale ' + str(args.scale) if args.scale != 1.0 else ''}"
            f"{''.join(' --only ' + k for k in args.only or [])} --write-md` ({platform.machine()}, "
            f"{os.cpu_count()} cores)\n\n" + baseline_table(found, args.repeat)
        )
        print(body)
        if args.write_md:
            write_section("trial_read_baseline", body)
        return 0
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
        f"`SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.trial_read --repeat {args.repeat}"
        f"{' --scale ' + str(args.scale) if args.scale != 1.0 else ''}"
        f"{''.join(' --only ' + k for k in args.only or [])} --write-md` "
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
