"""Benchmark: the profiler rules over system metrics of a 96-vCPU, 8-GPU host sampled every 100 ms.

Run from the repo root:

    SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.profiler_rules \\
        [--scale 0.1] [--original-src PATH] [--repeat 1] [--write-md]

Data: profiler_read.py's generator (214 series, uniform random values, one-minute files; ``--scale 0.1`` is
six minutes, 770,000 lines), with the end-of-job markers. Measured, each in a fresh process on a warm page
cache: ProfilerReport as the rule evaluator runs it (all ten sub-rules and OverallFrameworkMetrics over a
ProfilerTrial), and, with ``--original-src`` (a git clone of awslabs/sagemaker-debugger) and SMDEBUG_PYTHON,
the 2020 rule classes (commit 225e39b9^, extracted into a temporary directory at run time, never into this
repository) driven by smdebug 1.0.34's ProfilerTrial the way the 2020 ProfilerReport drove them. Both
report each rule's RuleTriggered and Violations, which are compared.
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

from sdk_ext.format.profiler_paths import system_metrics_key
from sdk_ext.format.profiler_records import SystemMetric, encode_system_metrics
from tests.bench._markdown import write_section
from tests.bench.profiler_read import SERIES, T0, generate

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_profiler_rules_worker.py")
ORIGINAL = "225e39b9^"
ORIGINAL_FILES = ("__init__", "utils", "cpu_bottleneck", "io_bottleneck", "low_gpu_utilization", "step_outlier",
                  "gpu_memory_increase", "batch_size", "max_initialization_time", "load_balancing",
                  "overall_system_usage", "dataloader")


def extract_original(src: Path, into: Path) -> Path:
    """The 2020 rule modules as the package ``orig_rules`` under ``into`` (their imports of each other renamed)."""
    package = into / "orig_rules"
    package.mkdir(parents=True)
    for name in ORIGINAL_FILES:
        text = subprocess.run(["git", "-C", str(src), "show", f"{ORIGINAL}:smdebug/profiler/analysis/rules/{name}.py"],
                              capture_output=True, text=True, check=True).stdout
        (package / f"{name}.py").write_text(text.replace("smdebug.profiler.analysis.rules", "orig_rules"))
    return into


def close_last_minute(data: Path, seconds: int) -> int:
    """One more sample of every series, in a file of its own a minute later: smdebug's ProfilerTrial judges a
    window only once a file starts after it, so without this the 2020 rules would never see the last minute
    (a limit of theirs: on SageMaker the job's last minute of metrics goes unjudged). Returns its lines."""
    at = T0 + seconds
    metrics = [SystemMetric(t, n, d, 50.0, "algo-1", float(at)) for t, n, d in SERIES]
    path = data / system_metrics_key(at, "algo-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_system_metrics(metrics))
    return len(metrics)


def run(args: list[str], python: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([python, str(WORKER), *args], capture_output=True, text=True, env=env, check=False,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.1, help="of an hour (default 0.1: six minutes)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--original-src", type=Path, help="a git clone of awslabs/sagemaker-debugger")
    parser.add_argument("--hour", action="store_true",
                        help="also run sdk_ext alone over a whole hour (7.7 M lines; the 2020 rules would take hours)")
    parser.add_argument("--write-md", action="store_true", help="update the profiler_rules section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    seconds = max(120, round(3600 * args.scale))
    smdebug = os.environ.get("SMDEBUG_PYTHON")
    root = Path(tempfile.mkdtemp(prefix="sdk-ext-bench-rules-"))
    results: dict[str, dict[str, Any]] = {}
    try:
        data, lines = generate(root, seconds)
        lines += close_last_minute(data, seconds)
        for marker in ("system", "framework"):
            (data / marker).mkdir(exist_ok=True)
            (data / marker / "training_job_end.ts").write_bytes(b"")
        for path in data.rglob("*.json"):
            path.read_bytes()  # warm the page cache
        runs = {"sdk_ext": (["sdk_ext", str(data)], sys.executable)}
        if args.original_src and smdebug:
            extracted = extract_original(args.original_src, root / "original")
            runs["original"] = (["original", str(data), str(extracted)], smdebug)
        else:
            print("the 2020 rules need --original-src and SMDEBUG_PYTHON: left out", file=sys.stderr)
        load = os.getloadavg()
        if args.hour:
            hour, hour_lines = generate(root, 3600)
            hour_lines += close_last_minute(hour, 3600)
            for marker in ("system", "framework"):
                (hour / marker).mkdir(exist_ok=True)
                (hour / marker / "training_job_end.ts").write_bytes(b"")
            for path in hour.rglob("*.json"):
                path.read_bytes()
            results["hour"] = {**run(["sdk_ext", str(hour)], sys.executable), "lines": hour_lines}
            print(f"hour: {results['hour']}", file=sys.stderr)
        for _ in range(args.repeat):
            for name, (worker_args, python) in runs.items():
                result = run(worker_args, python)
                print(f"{name}: {result}", file=sys.stderr)
                if name not in results or result["seconds"] < results[name]["seconds"]:
                    results[name] = result
    finally:
        shutil.rmtree(root, ignore_errors=True)
    body = section(results, lines, seconds, args, load)
    print(body)
    if args.write_md:
        write_section("profiler_rules", body)
    return 0


def section(results: dict[str, dict[str, Any]], lines: int, seconds: int, args: argparse.Namespace,
            load: tuple[float, float, float]) -> str:
    ours, theirs, hour = results["sdk_ext"], results.get("original"), results.get("hour")
    scale = (f" --scale {args.scale}" if args.scale != 0.1 else "") + (f" --repeat {args.repeat}" if args.repeat > 1
                                                                       else "") + (" --hour" if hour else "")
    out = [
        "## Profiler rules: ProfilerReport over a 96-vCPU, 8-GPU host at 100 ms\n",
        f"`SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.profiler_rules{scale} --original-src "
        f"<clone of awslabs/sagemaker-debugger> --write-md` ({platform.machine()}, {os.cpu_count()} cores shared "
        f"with other work, load average {load[0]:.1f} at the start; Python {platform.python_version()}). "
        + (f"Best of {args.repeat} runs each. " if args.repeat > 1 else "") +
        f"{seconds} s of data, {lines} lines in {seconds // 60 + 1} files (the last, one sample per series a "
        "minute later, lets the 2020 rules judge the last minute too); one process per run, warm page cache.\n",
        "| run | time | windows | peak RSS | lines per second | original / sdk_ext |",
        "|---|---|---|---|---|---|",
        f"| sdk_ext ProfilerReport (11 rules, ProfilerTrial) | {ours['seconds']:.1f} s | {ours['windows']} | "
        f"{ours['rss_mib']:.0f} MiB | {lines / ours['seconds']:,.0f} | |",
    ]
    if hour:
        out.append(f"| sdk_ext ProfilerReport over a whole hour ({hour['lines']} lines) | {hour['seconds']:.1f} s | "
                   f"{hour['windows']} | {hour['rss_mib']:.0f} MiB | {hour['lines'] / hour['seconds']:,.0f} | |")
    if theirs:
        n = len(theirs["rules"])
        out.append(f"| the 2020 rules ({n} of them, smdebug 1.0.34's ProfilerTrial) | {theirs['seconds']:.1f} s | "
                   f"{theirs['windows']} | {theirs['rss_mib']:.0f} MiB | {lines / theirs['seconds']:,.0f} | "
                   f"**{theirs['seconds'] / ours['seconds']:.1f}x** |")
        out += ["", "| rule | sdk_ext RuleTriggered / Violations | 2020 rules RuleTriggered / Violations |",
                "|---|---|---|"]
        for rule, (fired, violations) in ours["rules"].items():
            other = theirs["rules"].get(rule)
            shown = f"{other[0]} / {other[1]}" if other else f"not run ({theirs['skipped'].get(rule, 'absent')})"
            out.append(f"| {rule} | {fired} / {violations} | {shown} |")
        out += ["", "sdk_ext judges one window more: the last file's minute, which smdebug's ProfilerTrial never "
                "judges (it ends once a window starts at the newest file's name). Counts made once per window "
                "(LowGPUUtilization's violations, the bottleneck rules' RuleTriggered) differ by that window; "
                "counts made per sample or snapshot (the bottlenecks, GPUMemoryIncrease) are the 2020 code's."]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
