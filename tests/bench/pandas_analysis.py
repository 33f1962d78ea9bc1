"""Benchmark: smdebug's notebook analysis (PandasFrameAnalysis) over a job's frames, sdk_ext vs smdebug 1.0.34.

Run from the repo root:

    SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.pandas_analysis [--minutes 10] [--repeat 2] [--write-md]

The data is tests/bench/merge_timeline.py's: ``--minutes`` of one host (19 system series at 100 ms, a 100 ms
training step, five dataloader events per step). Each library's own PandasFrame makes the frames (not
timed); the analysis is built (smdebug's constructor finds each dataloader event's step) and every query
run once: the step statistics by each grouping, utilization overall and by training phase, device usage,
the training-phase intervals, the job statistics. A fresh process per run, ``--repeat`` runs interleaved;
the best total counts.
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

from tests.bench._markdown import write_section
from tests.bench.merge_timeline import generate

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_pandas_analysis_worker.py")


def run(library: str, root: Path, python: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([python, str(WORKER), library, str(root)], capture_output=True, text=True, env=env,
                          check=False, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{library} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--write-md", action="store_true", help="update the pandas_analysis section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    smdebug = os.environ.get("SMDEBUG_PYTHON")
    if not smdebug:
        print("SMDEBUG_PYTHON is not set: smdebug is left out", file=sys.stderr)
    root = Path(tempfile.mkdtemp(prefix="sdk-ext-bench-analysis-"))
    try:
        data, counts = generate(root, args.minutes)
        libraries = {"sdk_ext": sys.executable, **({"smdebug": smdebug} if smdebug else {})}
        load = os.getloadavg()
        best: dict[str, dict[str, Any]] = {}
        for _ in range(args.repeat):
            for library, python in libraries.items():
                result = run(library, data, python)
                print(f"{library}: {result}", file=sys.stderr)
                if library not in best or result["seconds"] < best[library]["seconds"]:
                    best[library] = result
    finally:
        shutil.rmtree(root, ignore_errors=True)
    names = list(best["sdk_ext"]["parts"])
    header = "| part | " + " | ".join("smdebug 1.0.34" if k == "smdebug" else "sdk_ext" for k in best) + " | smdebug / sdk_ext |"
    rows = [header, "|---" * (len(best) + 2) + "|"]
    for name in [*names, "total"]:
        values = [r["seconds"] if name == "total" else r["parts"][name] for r in best.values()]
        ratio = f"**{values[1] / values[0]:.0f}x**" if len(values) == 2 and values[0] > 0 else ""
        rows.append(f"| {name} | " + " | ".join(f"{v * 1000:.0f} ms" for v in values) + f" | {ratio} |")
    rows.append("| peak RSS | " + " | ".join(f"{r['rss_mib']:.0f} MiB" for r in best.values()) + " | |")
    body = (
        "## Profiler: notebook analysis (PandasFrameAnalysis)\n\n"
        f"`SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.pandas_analysis --minutes {args.minutes} "
        f"--repeat {args.repeat} --write-md` ({platform.machine()}, {os.cpu_count()} cores shared with other work, "
        f"load average {load[0]:.1f} at the start; Python {platform.python_version()}). "
        + (f"Best of {args.repeat} runs each, interleaved" if args.repeat > 1 else "One run each")
        + f", a fresh process per run. Frames of {args.minutes} minutes of one host: "
        f"{best['sdk_ext']['system_rows']} system rows, {best['sdk_ext']['framework_rows']} framework rows "
        f"({counts['steps']} steps, {counts['data']} dataloader events).\n\n" + "\n".join(rows)
    )
    print(body)
    if args.write_md:
        write_section("pandas_analysis", body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
