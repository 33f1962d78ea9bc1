"""Benchmark: rule detection latency, from the offending step's files appearing to IssuesFound.

Run from the repo root (``make bench`` sets SMDEBUG_PYTHON):

    SMDEBUG_PYTHON=/path/to/smdebug-venv/bin/python python -m tests.bench.rule_detection [--runs 10] [--write-md]

Each run starts the evaluator on an empty trial directory, then a fake training job in a second
process (tests/functional/rules/live_writer.py: sdk_ext.hooks.Hook saving a 1000-element gradient
every ``--interval`` s) whose gradient vanishes at step ``--bad-step``. This process polls the trial
directory every millisecond for that step's index file (the file a reader needs to see the step);
its appearance is t0. The end is the moment the evaluator wrote its IssuesFound status:

* ``sdk_ext``: ``python rules/evaluate.py --rule-name VanishingGradient`` (default poll interval
  0.2 s); end = ``LastModifiedTime`` of the IssuesFound status.json (same clock, same machine);
* ``smdebug``: smdebug 1.0.34's ``invoke_rule`` with the same decision written as a custom smdebug
  rule (SageMaker's built-in rule code was never published), in its own venv; end = the time its
  process records when ``RuleEvaluationConditionMet`` reaches it.

Runs alternate between the two evaluators; each run uses a fresh trial.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SMDEBUG_WORKER = Path(__file__).with_name("_smdebug_rule_worker.py")
MARK_START, MARK_END = "<!-- bench:rule_detection:start -->", "<!-- bench:rule_detection:end -->"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "rules"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["SDK_EXT_LOG_LEVEL"] = "WARNING"
    env.pop("TRAINING_JOB_NAME", None)
    return env


def _wait_for_file(path: Path, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return time.time()
        time.sleep(0.001)
    raise TimeoutError(f"{path} did not appear within {timeout} s")


def one_run(kind: str, root: Path, args: argparse.Namespace) -> float:
    trial = root / f"{kind}-trial"
    env = _env()
    if kind == "sdk_ext":
        out = root / f"{kind}-out"
        evaluator = subprocess.Popen(
            [sys.executable, str(REPO / "rules" / "evaluate.py"), "--trial-dir", str(trial), "--rule-name",
             "VanishingGradient", "--output-dir", str(out), "--poll-interval", str(args.poll_interval)], env=env)
        _wait_for_file(out / "status.json", 30)  # InProgress: the evaluator is up
    else:
        out = root / f"{kind}-fired.json"
        evaluator = subprocess.Popen([args.smdebug_python, str(SMDEBUG_WORKER), str(trial), str(out)], env=env,
                                     stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        time.sleep(1.0)  # its import takes about this long; it then waits for the trial
    job = subprocess.Popen(
        [sys.executable, "-m", "tests.functional.rules.live_writer", str(trial), "--steps", str(args.bad_step + 20),
         "--interval", str(args.interval), "--bad-step", str(args.bad_step), "--no-end"], env=env, cwd=REPO)
    try:
        bad_index = trial / "index" / "000000000" / f"{args.bad_step:012d}_worker_0.json"
        t0 = _wait_for_file(bad_index, 120)
        code = evaluator.wait(timeout=120)
        if code != 3:
            raise RuntimeError(f"{kind} evaluator exited with {code}, expected 3 (IssuesFound)")
        if kind == "sdk_ext":
            status = json.loads((out / "status.json").read_text())
            assert status["RuleEvaluationStatus"] == "IssuesFound" and status["Step"] == args.bad_step, status
            t1 = dt.datetime.fromisoformat(status["LastModifiedTime"].replace("Z", "+00:00")).timestamp()
        else:
            fired = json.loads(out.read_text())
            assert fired["step"] == args.bad_step, fired
            t1 = fired["time"]
        return t1 - t0
    finally:
        job.kill()
        job.wait()
        if evaluator.poll() is None:
            evaluator.kill()
            evaluator.wait()


def summarize(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "mean": statistics.fmean(ordered), "min": ordered[0],
            "max": ordered[-1], "p90": ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]}


def markdown(results: dict[str, dict[str, float]], args: argparse.Namespace, command: str) -> str:
    lines = [
        MARK_START,
        "## Rules: detection latency (offending step written -> IssuesFound)",
        "",
        f"Command: `{command}`  ",
        (f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
         f"{args.runs} runs per evaluator; writer saves one step every {args.interval} s, the gradient vanishes at "
         f"step {args.bad_step}; sdk_ext poll interval {args.poll_interval} s."),
        "",
        "| evaluator | median s | mean s | p90 s | min s | max s |",
        "|---|---|---|---|---|---|",
    ]
    for kind, r in results.items():
        lines.append(f"| {kind} | {r['median']:.3f} | {r['mean']:.3f} | {r['p90']:.3f} | {r['min']:.3f} | "
                     f"{r['max']:.3f} |")
    if "smdebug" in results:
        ratio = results["smdebug"]["median"] / results["sdk_ext"]["median"]
        lines += ["", (f"Ratio smdebug / sdk_ext (median): {ratio:.1f}x; worst case sdk_ext: "
                       f"{results['sdk_ext']['max']:.3f} s (target: < 2 s).")]
    lines += ["", ("t0 = the bad step's index file appears (polled every 1 ms by the benchmark); t1 = the "
                   "evaluator's IssuesFound (sdk_ext: status.json LastModifiedTime; smdebug: when invoke_rule raises)."),
              MARK_END]
    return "\n".join(lines)


def write_md(text: str) -> None:
    path = REPO / "BENCHMARKS.md"
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if MARK_START in old and MARK_END in old:
        head, rest = old.split(MARK_START, 1)
        tail = rest.split(MARK_END, 1)[1]
        new = head + text + tail
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(new)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--bad-step", type=int, default=60)
    p.add_argument("--poll-interval", type=float, default=0.2)
    p.add_argument("--smdebug-python", default=os.environ.get("SMDEBUG_PYTHON"))
    p.add_argument("--write-md", action="store_true")
    args = p.parse_args(argv)
    kinds = ["sdk_ext"] + (["smdebug"] if args.smdebug_python else [])
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="sdk-ext-bench-rules-") as tmp:
        for i in range(args.runs):
            for kind in kinds:
                root = Path(tmp) / f"{i}"
                root.mkdir(exist_ok=True)
                latency = one_run(kind, root, args)
                samples[kind].append(latency)
                print(f"run {i} {kind}: {latency:.3f} s", flush=True)
    results = {k: summarize(v) for k, v in samples.items()}
    command = "SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.rule_detection " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("--smdebug-python"))
    text = markdown(results, args, command.strip())
    print(text)
    if args.write_md:
        write_md(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
