"""Benchmark: merging a job's timelines into one Chrome-trace file, sdk_ext vs smdebug 1.0.34.

Run from the repo root:

    SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.merge_timeline [--minutes 10] [--repeat 2] [--write-md]

The data: ``--minutes`` of one host (``algo-1``) written with sdk_ext's codecs into a temporary directory:
system metrics every 100 ms (8 CPUs x CPUUtilization and I/OWaitPercentage, one GPU x GPUUtilization and
GPUMemoryUtilization, memory: 19 series; GPU utilization uniform in 0..100, so that most samples are below
smdebug's 85% mark), a step timeline of a 100 ms step (``Step:ModeKeys.TRAIN``, one file a minute) and
five dataloader events per step (``DataIterator``, one file a minute).

Each merge of the whole job (``MergedTimeline(path).merge_timeline(first, last)``, system metrics
included: smdebug's default) runs in a fresh process on a warm page cache, ``--repeat`` times
interleaved; the best counts. The merged files are checked to hold the same framework events.
``--big`` adds sdk_ext alone on ``--big`` times the minutes, once with the default in-memory bound and once
with everything sorted in memory, to show what the bound does to memory.
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
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.format.profiler_paths import (
    MODEL_TIMELINE_SUFFIX,
    PYTHON_TIMELINE_SUFFIX,
    node_id_for,
    system_metrics_key,
    trace_file_key,
)
from sdk_ext.format.profiler_records import (
    SystemMetric,
    TimelineEvent,
    encode_system_metrics,
    encode_trace_file,
)
from tests.bench._markdown import write_section

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_merge_timeline_worker.py")
T0 = 1_764_000_000  # a whole minute (2025-11-24 16:00 UTC)
HZ, STEP_US, DATA_PER_STEP = 10, 100_000, 5
SERIES = (
    [("cpu", f"cpu{i}", d) for i in range(8) for d in ("CPUUtilization", "I/OWaitPercentage")]
    + [("gpu", "gpu0", d) for d in ("GPUUtilization", "GPUMemoryUtilization")]
    + [("memory", "MemoryUsedPercent", "")]
)


def generate(root: Path, minutes: int) -> tuple[Path, dict[str, int]]:
    out = root / f"profiler-output-{minutes}m"
    counts = {"system": minutes * 60 * HZ * len(SERIES), "steps": minutes * 60 * 1_000_000 // STEP_US}
    counts["data"] = counts["steps"] * DATA_PER_STEP
    if (out / ".generated").exists():
        return out, counts
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(0)
    node = node_id_for("algo-1", 905)
    base = T0 * 1_000_000
    for minute in range(minutes):
        values = np.round(rng.uniform(0, 100, size=(60 * HZ, len(SERIES))), 2).tolist()
        metrics = [SystemMetric(t, n, d, values[k][s], "algo-1", round(T0 + minute * 60 + k / HZ + 0.000123, 6))
                   for k in range(60 * HZ) for s, (t, n, d) in enumerate(SERIES)]
        path = out / system_metrics_key(T0 + minute * 60, "algo-1")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_system_metrics(metrics))
        steps, data = [], []
        first = minute * 60 * 1_000_000 // STEP_US
        for step in range(first, first + 60 * 1_000_000 // STEP_US):
            begin = base + step * STEP_US
            steps.append(TimelineEvent("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", begin + 50, STEP_US - 100,
                                       {"pid": 905, "step_num": str(step)}))
            data.extend(TimelineEvent("DataIterator", "dataset::GetNext", begin + 100 + i * 15_000, 9_000)
                        for i in range(DATA_PER_STEP))
        for events, suffix in ((steps, PYTHON_TIMELINE_SUFFIX), (data, MODEL_TIMELINE_SUFFIX)):
            end = max(e.start_us + e.duration_us for e in events)
            path = out / trace_file_key(end, node, suffix)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encode_trace_file(events, start_time_us=base))
    (out / ".generated").write_text("done")
    return out, counts


def run(merger: str, root: Path, out: Path, end: int, python: str, limit: int = 0) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([python, str(WORKER), merger, str(root), str(out), str(T0 * 1_000_000), str(end), str(limit)],
                          capture_output=True, text=True, env=env, check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{merger} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--big", type=int, default=0, help="also sdk_ext alone on this many times the minutes")
    parser.add_argument("--write-md", action="store_true", help="update the merge_timeline section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    smdebug = os.environ.get("SMDEBUG_PYTHON")
    if not smdebug:
        print("SMDEBUG_PYTHON is not set: smdebug is left out", file=sys.stderr)
    root = Path(tempfile.mkdtemp(prefix="sdk-ext-bench-merge-"))
    try:
        data, counts = generate(root, args.minutes)
        for path in data.rglob("*.json"):
            path.read_bytes()  # warm the page cache
        end = (T0 + args.minutes * 60) * 1_000_000
        mergers = {"sdk_ext": sys.executable, **({"smdebug": smdebug} if smdebug else {})}
        load = os.getloadavg()
        best: dict[str, dict[str, Any]] = {}
        for _ in range(args.repeat):
            for merger, python in mergers.items():
                result = run(merger, data, root / f"out-{merger}", end, python)
                print(f"{merger}: {result}", file=sys.stderr)
                if merger not in best or result["seconds"] < best[merger]["seconds"]:
                    best[merger] = result
        if "smdebug" in best:
            assert best["sdk_ext"]["complete"] == best["smdebug"]["complete"], best
        big: list[tuple[str, dict[str, Any]]] = []
        if args.big:
            bigger, big_counts = generate(root, args.minutes * args.big)
            for path in bigger.rglob("*.json"):
                path.read_bytes()
            big_end = (T0 + args.minutes * args.big * 60) * 1_000_000
            for label, limit in (("default bound (500,000 events in memory)", 0), ("all in memory", 10**9)):
                result = run("sdk_ext", bigger, root / "out-big", big_end, sys.executable, limit)
                print(f"big {label}: {result}", file=sys.stderr)
                big.append((label, result))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = ["| merger | events written | of them framework (X) | file | time | peak RSS | smdebug / this |",
            "|---|---|---|---|---|---|---|"]
    for merger, r in best.items():
        ratio = f"**{best['smdebug']['seconds'] / r['seconds']:.1f}x**" if "smdebug" in best and merger != "smdebug" else ""
        rows.append(f"| {'smdebug 1.0.34' if merger == 'smdebug' else 'sdk_ext'} | {r['events']} | {r['complete']} "
                    f"| {r['mib']:.0f} MiB | {r['seconds']:.2f} s | {r['rss_mib']:.0f} MiB | {ratio} |")
    for label, r in big:
        rows.append(f"| sdk_ext, {args.minutes * args.big} minutes, {label} | {r['events']} | {r['complete']} "
                    f"| {r['mib']:.0f} MiB | {r['seconds']:.2f} s | {r['rss_mib']:.0f} MiB | |")
    big_flag = f" --big {args.big}" if args.big else ""
    body = (
        "## Profiler: merging timelines into one trace file\n\n"
        f"`SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.merge_timeline --minutes {args.minutes} "
        f"--repeat {args.repeat}{big_flag} --write-md` ({platform.machine()}, {os.cpu_count()} cores shared with other "
        f"work, load average {load[0]:.1f} at the start; Python {platform.python_version()}). "
        + (f"Best of {args.repeat} runs each, interleaved" if args.repeat > 1 else "One run each")
        + ", a fresh process per run, warm page cache. Input: "
        f"{args.minutes} minutes of one host: {counts['system']} system samples, {counts['steps']} steps and "
        f"{counts['data']} dataloader events; the whole job merged, system metrics included (smdebug's default). "
        "Both files hold the same framework events.\n\n" + "\n".join(rows)
    )
    print(body)
    if args.write_md:
        write_section("merge_timeline", body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
