"""``sdk-ext trial``, ``sdk-ext rules`` and ``sdk-ext report``: looking at a saved trial."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.exceptions import ConfigError, SdkExtError
from sdk_ext.local.cli.console import Console
from sdk_ext.local.jobs import deployment, rule_jobs
from sdk_ext.local.jobs.processes import Child, stop_all
from sdk_ext.local.report.data import locate
from sdk_ext.local.request.from_options import build_request
from sdk_ext.modes import ModeKeys
from sdk_ext.rules.status import coverage_gap, reason


def add_parsers(sub: Any) -> None:
    t = sub.add_parser("trial", help="summarise a trial, or print one tensor's values",
                       description="PATH: a trial directory, s3://bucket/prefix, or a local job directory.")
    t.add_argument("path")
    t.add_argument("--tensor", help="print this tensor's values per step")
    t.add_argument("--step", type=int, action="append", help="only this step (repeatable)")
    t.add_argument("--mode", choices=[m.name for m in ModeKeys], help="steps of this mode (its mode steps)")
    t.add_argument("--json", action="store_true", help="machine-readable output")
    t.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the trial's first data")
    t.set_defaults(handler=trial_command)

    r = sub.add_parser("rules", help="run rules over a saved trial or profiler output",
                       description="Runs one rules/evaluate.py per rule over the trial at PATH (all saved steps; "
                       "--live waits for a running job's end instead). A profiler rule (LowGPUUtilization, "
                       "StepOutlier, ..., ProfilerReport) runs over PATH's profiler output (a job directory, its "
                       "profiler-output/, or an s3:// prefix), all of it. Exit code: 0 no issues, 3 issues found, "
                       "2 an evaluation failed.")
    r.add_argument("path")
    r.add_argument("--rule", action="append", default=[], metavar="NAME")
    r.add_argument("--rule-param", action="append", default=[], metavar="RULE:KEY=VALUE")
    r.add_argument("--custom-rule", action="append", default=[], metavar="FILE.py:CLASS")
    r.add_argument("--output-dir", type=Path, help="keep each rule's status.json and log here")
    r.add_argument("--live", action="store_true", help="the job still writes: evaluate until its end marker")
    r.add_argument("--json", action="store_true")
    r.set_defaults(handler=rules_command)

    f = sub.add_parser("profile", help="summarise a job's profiler output and its profiler rules",
                       description="PATH: a local job directory, its profiler-output/ directory, or an s3:// prefix "
                       "of one (SageMaker's <output>/<job>/profiler-output). Prints hosts, utilization, step "
                       "durations with their outliers, and each profiler rule's verdict. Exit code: 0, or 1 when "
                       "PATH holds no profiler data.")
    f.add_argument("path")
    f.add_argument("--job", type=Path, help="a job.json or saved DescribeTrainingJob response (profiler rules' verdicts)")
    f.add_argument("--json", action="store_true", help="machine-readable output")
    f.set_defaults(handler=profile_command)

    p = sub.add_parser("report", help="write a self-contained HTML report of a trial and its job")
    p.add_argument("path", help="a local job directory, or a trial (directory or s3:// prefix)")
    p.add_argument("-o", "--output", type=Path, help="default: <job dir>/report.html, or ./report.html")
    p.add_argument("--job", type=Path, help="a job.json or saved DescribeTrainingJob response (for a plain trial)")
    p.add_argument("--max-series", type=int, default=12, help="layers drawn per chart (default 12)")
    p.set_defaults(handler=report_command)


def _existing(path: str) -> str:
    """``path`` (a trial or job directory, or an ``s3://`` URI, kept as it is) if it can hold a trial.

    Raises:
        ConfigError: a local path that does not exist (said at once, not after the trial's wait).
    """
    if not path.startswith("s3://") and not os.path.exists(path):
        raise ConfigError(f"{path} does not exist; give a trial directory, a job directory (sdk-ext run makes "
                          "them under ./sdk-ext-jobs) or an s3://bucket/prefix", where="arguments")
    return path


# --- trial ------------------------------------------------------------------------------------------

def _stats(value: np.ndarray[Any, Any]) -> dict[str, Any]:
    flat = np.asarray(value)
    if flat.size == 1:
        return {"value": flat.reshape(-1)[0].item()}
    out: dict[str, Any] = {"shape": list(flat.shape), "dtype": str(flat.dtype)}
    if flat.size and np.issubdtype(flat.dtype, np.number):
        as_float = flat.astype(np.float64, copy=False)
        finite = as_float[np.isfinite(as_float)]
        out.update(nan=int(np.isnan(as_float).sum()), inf=int(np.isinf(as_float).sum()))
        if finite.size:
            out.update(min=float(finite.min()), max=float(finite.max()), mean=float(finite.mean()),
                       l2=float(np.linalg.norm(finite)))
    return out


def trial_command(args: argparse.Namespace, console: Console) -> int:
    from sdk_ext.trials import create_trial

    trial_path, _, _ = locate(_existing(args.path))
    trial = create_trial(trial_path, timeout=args.timeout)
    mode = ModeKeys[args.mode] if args.mode else ModeKeys.GLOBAL
    if args.tensor:
        if not trial.has_tensor(args.tensor):
            raise ConfigError(f"no tensor {args.tensor!r} in {trial_path}; `sdk-ext trial {args.path}` lists them",
                              where="arguments")
        tensor = trial.tensor(args.tensor)
        steps = [s for s in tensor.steps(mode=mode) if not args.step or s in args.step]
        rows = []
        for i, step in enumerate(steps):
            console.progress(i, len(steps), args.tensor)
            try:
                rows.append({"step": step, **_stats(tensor.value(step, mode=mode))})
            except SdkExtError as err:
                rows.append({"step": step, "error": str(err)})
        console.done()
        if args.json:
            console.result(json.dumps(rows, default=str))
        for row in [] if args.json else rows:
            rest = ", ".join(f"{k} {_num(v)}" for k, v in row.items() if k != "step")
            console.result(f"step {row['step']}: {rest}")
        return 0
    steps = trial.steps(mode=mode)
    names = trial.tensor_names()
    summary: dict[str, Any] = {
        "path": str(trial_path), "workers": trial.workers(), "steps": len(steps),
        "first_step": steps[0] if steps else None, "last_step": steps[-1] if steps else None,
        "modes": _modes(trial, trial.steps()),
        # a collection's tensors as tensor_names(collection=...) finds them: its include_regex matches too,
        # not only the names listed in the collections file
        "collections": {n: sorted(t for t in names if c.matches(t)) for n, c in sorted(trial.collections().items())},
        "tensors": {},
    }
    for i, name in enumerate(names):
        console.progress(i, len(names), name)
        summary["tensors"][name] = {"steps": len(trial.tensor(name).steps(mode=mode))}
    console.done()
    if args.json:
        console.result(json.dumps(summary))
        return 0
    console.result(f"trial {summary['path']}")
    console.result(f"  workers: {', '.join(summary['workers']) or 'none'}")
    span = f" ({summary['first_step']} to {summary['last_step']})" if steps else ""
    console.result(f"  steps: {len(steps)}{span}")
    console.result("  modes: " + (", ".join(f"{m} {n}" for m, n in summary["modes"].items()) or "none"))
    console.result("  collections: " + (", ".join(f"{n} ({len(t)})" for n, t in summary["collections"].items())
                                        or "none"))
    console.result(f"  tensors: {len(names)}")
    for name, info in summary["tensors"].items():
        console.result(f"    {name}  ({info['steps']} steps)")
    return 0


def _modes(trial: Any, steps: list[int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in steps:
        mode = trial.mode(step)
        key = mode.name if mode is not None else "unknown"
        counts[key] = counts.get(key, 0) + 1
    return counts


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


# --- rules ------------------------------------------------------------------------------------------

def _evaluate(request: dict[str, Any], trial_path: str, root: Path, extra: list[str],
              console: Console, *, profiler_path: str = "", profiler_extra: Sequence[str] = ()
              ) -> dict[str, rule_jobs.StatusFile]:
    """One evaluator per rule, each with its status file and log in ``root/<rule>``: tensor rules over the
    trial, profiler rules over the profiler output (``profiler_path``)."""
    evaluator = deployment.evaluator_command()
    env = rule_jobs.evaluator_env(os.environ, deployment.child_pythonpath(os.environ.get("PYTHONPATH")))
    procs: list[rule_jobs.RuleProcess] = []
    results: dict[str, rule_jobs.StatusFile] = {}
    try:
        rules = [(r, False) for r in request.get("DebugRuleConfigurations") or []] + \
            [(r, True) for r in request.get("ProfilerRuleConfigurations") or []]
        for rule, profiler in rules:
            name = rule["RuleConfigurationName"]
            out = root / name
            out.mkdir(parents=True, exist_ok=True)
            argv = rule_jobs.evaluator_argv(python=sys.executable, evaluator=evaluator,
                                            trial_dir=profiler_path if profiler else trial_path,
                                            output_dir=out, rule_configuration_name=name,
                                            rule_parameters=rule_jobs.describe_rule_parameters(rule),
                                            poll_interval=0.2, extra=list(profiler_extra) if profiler else extra)
            child = Child(f"rule {name}", argv, env=env, cwd=out, log_path=out / "evaluator.log",
                          parent_death_signal=signal.SIGKILL)
            child.start()
            procs.append(rule_jobs.RuleProcess(name, child, out, profiler=profiler))
        while len(results) < len(procs):
            for p in procs:
                code = p.child.poll()
                if code is not None and p.name not in results:
                    results[p.name] = p.final_status(code)
            console.status(f"rules: {len(results)}/{len(procs)} done")
            time.sleep(0.1)
    finally:
        stop_all([p.child for p in procs], 2.0)
        console.done()
    return results


def rules_command(args: argparse.Namespace, console: Console) -> int:
    from sdk_ext.profiler.profiler_trial import profiler_root
    from sdk_ext.trials import create_trial

    if not args.rule and not args.custom_rule:
        raise ConfigError("name at least one --rule NAME or --custom-rule FILE.py:CLASS", where="arguments")
    request = build_request(script=None, base={"TrainingJobName": "sdk-ext-rules"}, job_name=None, rules=args.rule,
                            rule_params=args.rule_param, custom_rules=args.custom_rule)
    extra: list[str] = []
    trial_path = ""
    if request.get("DebugRuleConfigurations"):
        trial_path, _, _ = locate(_existing(args.path))
        if not trial_path.startswith("s3://"):
            trial_path = os.path.abspath(trial_path)  # every relative path is the caller's: evaluators run elsewhere
        if not args.live:
            steps = create_trial(trial_path, timeout=5.0).steps()
            if not steps:
                raise ConfigError(f"the trial at {trial_path} has no saved steps", where="arguments")
            # a saved trial: its data is there already, so the evaluators need not wait for it
            extra = ["--end-step", str(steps[-1] + 1), "--wait-timeout", "10"]
    profiler_path = ""
    if request.get("ProfilerRuleConfigurations"):
        profiler_path = profiler_root(_existing(args.path))
        if not profiler_path.startswith("s3://"):
            profiler_path = os.path.abspath(profiler_path)
    # saved profiler output is complete whether or not it has its end marker (a copy of a running job's)
    profiler_extra = ["--profiler"] + ([] if args.live else ["--finished"])
    with contextlib.ExitStack() as scratch:
        if args.output_dir is not None:
            root = args.output_dir.resolve()
        else:  # nobody asked to keep the status files: nothing is left behind
            root = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="sdk-ext-rules-")))
        results = _evaluate(request, trial_path, root, extra, console, profiler_path=profiler_path,
                            profiler_extra=profiler_extra)
    rows = [{"RuleConfigurationName": n, "RuleEvaluationStatus": s.status, "Step": s.step,
             "StatusDetails": s.details} for n, s in results.items()]
    if args.json:
        console.result(json.dumps(rows))
    else:
        for name, found in results.items():
            step = f" at step {found.step}" if found.step is not None else ""
            status, why = found.status, reason(found.details)
            gap = coverage_gap(found.details)
            if gap:
                status, why = f"NoIssuesFound, but it {gap[0]}", gap[1]
            console.result(f"{name}: {status}{step}" + (f" ({why})" if why else ""))
        if args.output_dir:
            console.result(f"status files and logs: {root}")
    statuses = {s.status for s in results.values()}
    return 2 if statuses - {"NoIssuesFound", "IssuesFound"} else 3 if "IssuesFound" in statuses else 0


# --- profile ----------------------------------------------------------------------------------------

def profile_command(args: argparse.Namespace, console: Console) -> int:
    from sdk_ext.local.report.profiling import summary_lines
    from sdk_ext.local.report.profiling_data import collect_profile, profile_json

    _, job, job_dir = locate(_existing(args.path), args.job)
    console.status("reading the profiler output")
    data = collect_profile(str(job_dir) if job_dir is not None else args.path, job=job, job_dir=job_dir)
    console.done()
    if args.json:
        console.result(json.dumps(profile_json(data)))
    else:
        for line in summary_lines(data):
            console.result(line)
    return 0 if data.has_data else 1


# --- report -----------------------------------------------------------------------------------------

def report_command(args: argparse.Namespace, console: Console) -> int:
    from sdk_ext.local.report.html import outcome, write_report

    _, _, job_dir = locate(_existing(args.path), args.job)
    out = args.output or ((job_dir / "report.html") if job_dir is not None else Path("report.html"))
    data = write_report(args.path, out, job_file=args.job, progress=console.progress, max_series=args.max_series)
    console.done()
    console.result(outcome(data)[1])
    console.result(f"report: {out.resolve()}")
    return 0
