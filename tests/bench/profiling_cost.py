"""Benchmark: what profiling costs a training job, sdk_ext vs smdebug 1.0.34.

Run from the repo root (smdebug's venv: ``make smdebug-venv``):

    SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.profiling_cost [--monitor-seconds 60] [--write-md]

Measures (``_profiling_worker.py``, each side in its own process, one run):
- the step timeline per step: sdk_ext's StepTimeline.begin() with files written, against smdebug's
  TimelineFileWriter.write_trace_events (the call its hooks made for each step); and the framework-free
  hook's step with profiling on vs off;
- the system monitor at 100 ms as a local job runs it (its own process), for a minute while a PyTorch MLP
  trains under the default hook with profiling on: the monitor's CPU time as a share of one core, and the
  MLP's step time with the monitor running vs stopped (SIGSTOP) vs stopped again (the noise floor), in
  alternating blocks. smdebug has no monitor (SageMaker's platform sampled the instances), so no column.

``--baseline DIR`` (a source tree of an earlier commit) instead measures profiling off before/after: the
framework-free hook's step and PyTorch's quiet fast path, in alternating before/after processes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.bench._markdown import write_section

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_profiling_worker.py")


def run_worker(python: str, args: list[str], code: Path = REPO) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(code))
    proc = subprocess.run([python, str(WORKER), *args], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def render(ours: dict[str, Any], theirs: dict[str, Any] | None, command: str, load: str) -> str:
    smdebug_us = f"{theirs['timeline_us_per_step']:.1f}" if theirs else "n/a"
    ratio = f"{ours['timeline_us_per_step'] / theirs['timeline_us_per_step']:.3f}" if theirs else ""
    step = ours["step_ms"]
    impact, floor = ours["running_vs_stopped_pct"], ours["stopped_again_vs_stopped_pct"]
    return "\n".join([
        "## Profiling: step timeline and system monitor costs",
        "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {ours['cores']} cores shared with other jobs (load average at start: {load}); "
        "compare within this run only.",
        "",
        "| measure | sdk_ext | smdebug 1.0.34 | sdk_ext / smdebug |",
        "|---|---|---|---|",
        f"| step timeline, us per step (the timeline call, files written) | {ours['timeline_us_per_step']:.2f} | "
        f"{smdebug_us} | {ratio} |",
        f"| framework-free hook step, us: profiling off / on | {ours['hook_step_us_off']:.2f} / "
        f"{ours['hook_step_us_on']:.2f} | | |",
        f"| system monitor at 100 ms: its CPU time over {ours['monitor_wall_s']:.0f} s of training, % of one core | "
        f"{ours['monitor_cpu_percent']:.2f} ({ours['monitor_cpu_s']:.2f} s) | (no monitor) | |",
        f"| MLP step, ms: monitor running / stopped / stopped again | {step['running']:.3f} / {step['stopped']:.3f} / "
        f"{step['stopped_again']:.3f} | | |",
        f"| step time, monitor running vs stopped, % (median of 120 paired rounds, quartiles) | {impact['median']:+.2f} "
        f"({impact['q1']:+.1f} .. {impact['q3']:+.1f}) | | |",
        f"| noise floor: stopped again vs stopped, % (same) | {floor['median']:+.2f} ({floor['q1']:+.1f} .. "
        f"{floor['q3']:+.1f}) | | |",
    ])


def off_cost_table(baseline: Path, rounds: int) -> str:
    """Profiling off, before (``baseline`` tree) and after (this tree), alternating pairs of processes."""
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for r in range(rounds):
        order = [("before", baseline), ("after", REPO)]
        for name, code in order if r % 2 == 0 else order[::-1]:
            with tempfile.TemporaryDirectory() as out:
                runs[name].append(run_worker(sys.executable, ["--impl", "offcost", "--out", out], code))
    lines = ["### Profiling off: the hooks before/after the step timeline (sdk_ext only, one run)", "",
             f"Command: `git archive <before> | tar -x -C /tmp/before; python -m tests.bench.profiling_cost "
             f"--baseline /tmp/before --rounds {rounds} --write-md`  ",
             f"{rounds} rounds of one before and one after process (order alternating); each cell: median (range) "
             "over processes of the best of 15 blocks of 10k steps. Load average at the end: "
             + ", ".join(f"{x:.1f}" for x in os.getloadavg()), "",
             "| us per step, profiling off | before | after | after / before |", "|---|---|---|---|"]
    for key, label in (("free_step_us", "framework-free hook, `with hook.step(): pass`"),
                       ("torch_forward_us", "PyTorch Linear(1, 1) forward, hook's quiet fast path")):
        before = [r[key] for r in runs["before"]]
        after = [r[key] for r in runs["after"]]
        b, a = statistics.median(before), statistics.median(after)
        lines.append(f"| {label} | {b:.2f} ({min(before):.2f} .. {max(before):.2f}) | {a:.2f} ({min(after):.2f} .. "
                     f"{max(after):.2f}) | {a / b:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.profiling_cost")
    parser.add_argument("--monitor-seconds", type=float, default=60.0)
    parser.add_argument("--write-md", action="store_true", help="update the profiling section of BENCHMARKS.md")
    parser.add_argument("--baseline", type=Path, help="a source tree before the change: profiling-off cost before/after")
    parser.add_argument("--rounds", type=int, default=8, help="with --baseline: before/after pairs of processes")
    args, _ = parser.parse_known_args(argv)
    if args.baseline is not None:
        text = off_cost_table(args.baseline.resolve(), args.rounds)
        print(text)
        if args.write_md:
            write_section("profiling_off_cost", text)
        return 0
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as ours_dir, tempfile.TemporaryDirectory() as theirs_dir:
        smdebug = os.environ.get("SMDEBUG_PYTHON")
        theirs = run_worker(smdebug, ["--impl", "smdebug", "--out", theirs_dir]) if smdebug else None
        ours = run_worker(sys.executable, ["--impl", "sdk_ext", "--out", ours_dir,
                                           "--monitor-seconds", str(args.monitor_seconds)])
    command = "SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.profiling_cost --write-md"
    text = render(ours, theirs, command, load)
    print(text)
    if args.write_md:
        write_section("profiling_cost", text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
