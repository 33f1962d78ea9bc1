"""Benchmark: reading an hour of system metrics of a 96-vCPU, 8-GPU host, sdk_ext vs smdebug 1.0.34.

Run from the repo root:

    SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.profiler_read [--scale 0.1] [--repeat 2] [--write-md]

The data one host, 100 ms samples for an hour, SageMaker's vocabulary: 96 CPUs x
(CPUUtilization, I/OWaitPercentage), 8 GPUs x (GPUUtilization, GPUMemoryUtilization), memory, three
disk and two network metrics: 214 series, 36,000 samples each, about 7.7 million lines in 60 one-minute
files (``system/incremental/YYYYMMDDHH/<epoch>.algo-1.json``), written with sdk_ext's codec
(sdk_ext.format.profiler_records) into a temporary directory. ``--scale`` multiplies the hour (quick
runs: 0.05 is three minutes).

Each read runs in a fresh process on a warm page cache, ``--repeat`` times interleaved; the best counts:

* the whole hour: sdk_ext ``get_series`` (arrays per series: what the profiler rules read), sdk_ext
  ``get_events`` (an object per sample, smdebug's API) and smdebug's ``get_events``;
* a one-minute window in the middle of the job: the same three, with the files each opened (every
  ``open`` of a ``.json`` under the root, counted alike for both libraries).

Peak RSS is the process's own ``ru_maxrss``.
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

from sdk_ext.format.profiler_paths import system_metrics_key
from sdk_ext.format.profiler_records import SystemMetric, encode_system_metrics
from tests.bench._markdown import write_section

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_profiler_read_worker.py")
T0 = 1_764_000_000  # a whole minute (2025-11-24 16:00 UTC)
CPUS, GPUS, HZ = 96, 8, 10
SERIES = (
    [("cpu", f"cpu{i}", d) for i in range(CPUS) for d in ("CPUUtilization", "I/OWaitPercentage")]
    + [("gpu", f"gpu{i}", d) for i in range(GPUS) for d in ("GPUUtilization", "GPUMemoryUtilization")]
    + [("memory", "total", "MemoryUsedPercent")]
    + [("io", "nvme0n1", d) for d in ("IOPS", "ReadThroughputInBytesPerSecond", "WriteThroughputInBytesPerSecond")]
    + [("network", "eth0", d) for d in ("ReceiveBytesPerSecond", "TransmitBytesPerSecond")]
)


def generate(root: Path, seconds: int) -> tuple[Path, int]:
    """``seconds`` of samples in one-minute files under ``root`` (reused if complete); (path, lines)."""
    out = root / f"profiler-output-{seconds}s"
    stamp = out / ".generated"
    lines = seconds * HZ * len(SERIES)
    if stamp.exists():
        return out, lines
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(0)
    began = time.perf_counter()
    for minute_start in range(0, seconds, 60):
        ticks = min(60, seconds - minute_start) * HZ
        values = np.round(rng.uniform(0, 100, size=(ticks, len(SERIES))), 2).tolist()
        metrics = [
            SystemMetric(t, n, d, values[k][s], "algo-1", round(T0 + minute_start + k / HZ + 0.000123, 6))
            for k in range(ticks)
            for s, (t, n, d) in enumerate(SERIES)
        ]
        path = out / system_metrics_key(T0 + minute_start, "algo-1")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encode_system_metrics(metrics))
    stamp.write_text("done")
    size = sum(p.stat().st_size for p in out.rglob("*.json"))
    print(f"generated {lines} lines ({size / 2**20:.0f} MiB) in {time.perf_counter() - began:.0f} s at {out}", file=sys.stderr)
    return out, lines


def run(reader: str, root: Path, start: int, end: int, python: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        [python, str(WORKER), reader, str(root), str(start), str(end)],
        capture_output=True, text=True, env=env, check=False, timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{reader} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(root: Path, seconds: int, repeat: int, smdebug: str | None) -> dict[str, dict[str, dict[str, Any]]]:
    readers = {"sdk_ext_series": sys.executable, "sdk_ext_events": sys.executable}
    if smdebug:
        readers["smdebug_events"] = smdebug
    middle = T0 + (seconds // 2 // 60) * 60 + 15  # a minute across two files
    windows = {"hour": (T0 * 10**6, (T0 + seconds) * 10**6), "minute": (middle * 10**6, (middle + 60) * 10**6)}
    for path in root.rglob("*.json"):
        path.read_bytes()  # warm the page cache
    best: dict[str, dict[str, dict[str, Any]]] = {}
    for window, (start, end) in windows.items():
        for _ in range(repeat):
            for reader, python in readers.items():
                result = run(reader, root, start, end, python)
                print(f"{window} {reader}: {result}", file=sys.stderr)
                kept = best.setdefault(window, {}).get(reader)
                if kept is None or result["seconds"] < kept["seconds"]:
                    best[window][reader] = result
        samples = {r["samples"] for r in best[window].values()}
        assert len(samples) == 1, f"the readers disagree on the samples of the {window}: {best[window]}"
    return best


def table(best: dict[str, dict[str, dict[str, Any]]], lines: int, size_mib: float) -> str:
    out = [
        "| window | reader | samples | files opened | time | us per sample | peak RSS | smdebug / this |",
        "|---|---|---|---|---|---|---|---|",
    ]
    names = {
        "sdk_ext_series": "sdk_ext `get_series` (arrays)",
        "sdk_ext_events": "sdk_ext `get_events` (objects)",
        "smdebug_events": "smdebug 1.0.34 `get_events`",
    }
    for window, results in best.items():
        theirs = results.get("smdebug_events")
        for reader, r in results.items():
            ratio = "" if theirs is None or reader == "smdebug_events" else f"**{theirs['seconds'] / r['seconds']:.1f}x**"
            out.append(
                f"| {window} | {names[reader]} | {r['samples']} | {r['files']} | {r['seconds']:.2f} s "
                f"| {r['seconds'] / max(r['samples'], 1) * 1e6:.2f} | {r['rss_mib']:.0f} MiB | {ratio} |"
            )
    return "\n".join(out) + f"\n\nData: {lines} lines, {size_mib:.0f} MiB of JSON lines."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, help="where to generate (and keep) the data; default: a temp dir")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the hour (quick runs: 0.05)")
    parser.add_argument("--write-md", action="store_true", help="update the profiler_read section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    seconds = max(120, round(3600 * args.scale))
    smdebug = os.environ.get("SMDEBUG_PYTHON")
    if not smdebug:
        print("SMDEBUG_PYTHON is not set: smdebug is left out", file=sys.stderr)
    root = args.dir or Path(tempfile.mkdtemp(prefix="sdk-ext-bench-profiler-"))
    try:
        data, lines = generate(root, seconds)
        size = sum(p.stat().st_size for p in data.rglob("*.json")) / 2**20
        load = os.getloadavg()
        best = measure(data, seconds, args.repeat, smdebug)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    scale = f" --scale {args.scale}" if args.scale != 1.0 else ""
    body = (
        "## Profiler: reading an hour of system metrics (96 vCPUs, 8 GPUs, 100 ms)\n\n"
        f"`SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.profiler_read --repeat {args.repeat}{scale} "
        f"--write-md` ({platform.machine()}, {os.cpu_count()} cores shared with other work, load average "
        f"{load[0]:.1f} at the start; Python {platform.python_version()}). "
        + (f"Best of {args.repeat} runs each, interleaved" if args.repeat > 1 else "One run each")
        + ", a fresh process per run, warm page cache; the readers agreed on every window's sample count.\n\n"
        + table(best, lines, size)
    )
    print(body)
    if args.write_md:
        write_section("profiler_read", body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
