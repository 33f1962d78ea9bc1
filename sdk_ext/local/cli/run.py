"""``sdk-ext run``: a training script (or a saved CreateTrainingJob request) as a local job."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.cli.console import Console
from sdk_ext.local.jobs.client import LocalSageMakerClient
from sdk_ext.local.jobs.disk import DiskFullError
from sdk_ext.local.jobs.runner import LocalSettings
from sdk_ext.local.request.from_options import build_request, with_cluster

DEFAULT_SAVE_INTERVAL = 10


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="run a training script as a local job with Debugger rules and auto-stop",
                       description="Run a training script (or a CreateTrainingJob request) as a local SageMaker "
                       "job: the hook writes tensors, one rule evaluator per rule reads them live, and the "
                       "auto-stop handler stops the job when a rule finds an issue.")
    p.add_argument("script", nargs="?", type=Path, help="the training script (python); omit with --request. "
                   "Arguments for the script go after --")
    p.add_argument("--request", type=Path, help="a CreateTrainingJob request (JSON) to run, e.g. a job's request.json")
    p.add_argument("--job-name", help="TrainingJobName (default: <script>-<UTC time>)")
    p.add_argument("--jobs-dir", type=Path, default=Path("sdk-ext-jobs"),
                   help="job directories go here (default: ./sdk-ext-jobs)")
    p.add_argument("--rule", action="append", default=[], metavar="NAME", help="a built-in rule, e.g. ExplodingTensor")
    p.add_argument("--rule-param", action="append", default=[], metavar="RULE:KEY=VALUE", help="a rule parameter")
    p.add_argument("--custom-rule", action="append", default=[], metavar="FILE.py:CLASS", help="your own rule class")
    p.add_argument("--collection", action="append", default=[], metavar="NAME", help="a collection to save")
    p.add_argument("--collection-param", action="append", default=[], metavar="NAME:KEY=VALUE")
    p.add_argument("--hook-param", action="append", default=[], metavar="KEY=VALUE", help="a HookParameters entry")
    p.add_argument("--save-interval", type=int, metavar="N",
                   help=f"save every N steps, every collection (default for a script: {DEFAULT_SAVE_INTERVAL}; "
                   "SageMaker's rule defaults save every 500 steps)")
    p.add_argument("-H", "--hyperparameter", action="append", default=[], metavar="KEY=VALUE",
                   help="passed to the script as --KEY VALUE")
    zero = p.add_mutually_exclusive_group()
    zero.add_argument("--zero-change", dest="zero_change", action="store_const", const=True, default=None,
                      help="always add the hook without code changes (the default for a script that imports torch or xgboost, "
                      "as SageMaker's framework containers do)")
    zero.add_argument("--no-zero-change", dest="zero_change", action="store_const", const=False,
                      help="run the script as it is: only the hook its own code creates saves data")
    p.add_argument("--profile", nargs="?", const=500, type=int, metavar="MS",
                   help="profile the job: sample CPU, memory, disk, network and GPUs every MS milliseconds (100, "
                        "200, 500 (default), 1000, 5000 or 60000) into <job dir>/profiler-output, and time each "
                        "step; write it --profile=MS")
    p.add_argument("--instance-count", type=int, metavar="N",
                   help="emulated hosts algo-1..N on this machine (ResourceConfig.InstanceCount; default 1)")
    p.add_argument("--processes-per-host", type=int, metavar="P",
                   help="processes per host: each a rank with torchrun's environment (RANK, LOCAL_RANK, "
                   "WORLD_SIZE, ...), unless the request names another launcher (mpirun)")
    p.add_argument("--no-auto-stop", action="store_true", help="do not deliver events to the auto-stop handler")
    p.add_argument("--profiler-rules-stop", action="store_true",
                   help="a profiler rule that finds issues stops the job too (by default only Debugger rules, and "
                   "profiler rules whose action_json asks for StopTraining, do)")
    p.add_argument("--stop-grace", type=float, default=10.0, help="seconds from SIGTERM to SIGKILL (default 10)")
    p.add_argument("--rule-timeout", type=float, default=60.0,
                   help="seconds rules may run after training ended (default 60)")
    p.add_argument("--report", action="store_true", help="write the HTML report (<job dir>/report.html)")
    p.add_argument("--report-file", type=Path, metavar="PATH", help="write the HTML report here")
    p.add_argument("--expect-status", choices=["Completed", "Stopped", "Failed"],
                   help="exit 1 unless the job ends in this status")
    p.add_argument("--json", action="store_true", help="print the final DescribeTrainingJob response as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="only the result")
    p.add_argument("-v", "--verbose", action="store_true", help="echo the script's output even when not a terminal")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace, console: Console) -> int:
    if args.script is None and args.request is None:
        raise ConfigError("give a training script, or --request FILE.json", where="arguments")
    base = json.loads(args.request.read_text(encoding="utf-8")) if args.request else None
    if base is not None and not isinstance(base, dict):
        raise ConfigError(f"{args.request} must hold a JSON object (CreateTrainingJob parameters)", where="arguments")
    # a script run alone saves every DEFAULT_SAVE_INTERVAL steps where no option says otherwise
    default_interval = DEFAULT_SAVE_INTERVAL if args.script is not None and base is None else None
    request = build_request(
        script=args.script, base=base, job_name=args.job_name, rules=args.rule, rule_params=args.rule_param,
        custom_rules=args.custom_rule, collections=args.collection, collection_params=args.collection_param,
        hook_params=args.hook_param, hyperparameters=args.hyperparameter, save_interval=args.save_interval,
        default_save_interval=default_interval, profile_ms=args.profile)
    request = with_cluster(request, instance_count=args.instance_count, processes_per_host=args.processes_per_host)
    _refuse_bad_hook_config(request, args)
    echo = console.result if args.verbose and not args.quiet else console.echo
    settings = LocalSettings(jobs_root=args.jobs_dir, stop_grace=args.stop_grace, rule_timeout=args.rule_timeout,
                             auto_stop=not args.no_auto_stop, profiler_rules_stop=args.profiler_rules_stop,
                             output=echo)
    client = LocalSageMakerClient(settings)
    try:
        runner = client.prepare_job(request, script_args=args.script_args, zero_change=args.zero_change)
    except DiskFullError as err:  # the environment failed, not the input: exit as a failed job does
        console.done()
        sys.stderr.write(f"sdk-ext: {err}; nothing was started\n")
        return 1
    console.status(f"{runner.name}: starting")
    watcher = _Watcher(runner, console)
    watcher.start()
    interrupted: str | None = None
    signalled: list[str] = []

    def on_sigterm(signum: int, frame: object) -> None:  # `kill PID` stops the job as Ctrl-C does
        signalled.append("SIGTERM")
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        final = runner.run()
    except KeyboardInterrupt:  # the runner stopped the job and ended every child; say what was saved
        interrupted = signalled[0] if signalled else "Ctrl-C"
        final = runner.job.describe()
    finally:
        signal.signal(signal.SIGTERM, previous)
        watcher.stop()
        console.done()
    report_path = None
    if args.report or args.report_file:
        from sdk_ext.local.report.html import write_report

        report_path = args.report_file or runner.dir.root / "report.html"
        try:
            write_report(runner.dir.root, report_path, progress=console.progress, trial_timeout=0)
        except Exception as err:  # noqa: BLE001 (the job ran; a report that cannot be drawn is reported, not fatal)
            console.result(f"report not written: {type(err).__name__}: {err}")
            report_path = None
        finally:
            console.done()
    if args.json:
        from sdk_ext.local.jobs.events import to_json

        console.result(json.dumps(to_json(final), indent=2))
    else:
        for line in summary_lines(final, runner.dir.root, report_path):
            console.result(line)
    if interrupted:
        console.result(f"interrupted ({interrupted}): the job was stopped")
        return 143 if interrupted == "SIGTERM" else 130
    status = final["TrainingJobStatus"]
    if args.expect_status is not None and status != args.expect_status:
        console.result(f"expected the job to end {args.expect_status}, but it ended {status}")
        return 1
    if _all_rules_without_data(final):
        return 1
    return 1 if status == "Failed" and args.expect_status != "Failed" else 0


def _all_rules_without_data(final: dict[str, Any]) -> bool:
    """Every rule ended in Error because the job saved nothing: nothing was checked, so not a success."""
    rules = final.get("DebugRuleEvaluationStatuses") or []
    return bool(rules) and all(r["RuleEvaluationStatus"] == "Error" and "No debugging data" in
                               (r.get("StatusDetails") or "") for r in rules)


def _refuse_bad_hook_config(request: dict[str, Any], args: argparse.Namespace) -> None:
    """What the job's hook would refuse (and then save nothing) is refused now, naming the option.

    Raises:
        ConfigError: one line per problem, each led by the option that caused it.
    """
    from sdk_ext.local.jobs import preflight

    named = []  # keys the hook would ignore (with a warning in the job's log): a typo here is refused
    for item in args.hook_param:
        for key, hint in preflight.unknown_keys([item.partition("=")[0]], collection=False):
            named.append(f"--hook-param {item}: the hook has no parameter {key!r}{hint}")
    for item in args.collection_param:
        for key, hint in preflight.unknown_keys([item.partition(":")[2].partition("=")[0]], collection=True):
            named.append(f"--collection-param {item}: a collection has no parameter {key!r}{hint}")
    problems = list(dict.fromkeys(preflight.hook_config_problems(request)))
    if not problems and not named:
        return
    collections = list(dict.fromkeys([*args.collection, *(c.partition(":")[0] for c in args.collection_param)]))
    for problem in problems:
        prefix, hint = "", ""
        bad_collection = next((c for c in collections if f"collection {c!r}" in problem), None)
        bad_param = next((h for h in args.hook_param if h.partition("=")[0] in problem), None)
        if bad_collection is not None:
            prefix = f"--collection {bad_collection}: "
            if "did you mean" not in problem:
                hint = preflight.did_you_mean(bad_collection, preflight.known_collections())
            problem = problem.replace(f"({bad_collection}:include_regex=", f"(--collection-param {bad_collection}:"
                                      "include_regex=")
        elif bad_param is not None:
            prefix = f"--hook-param {bad_param}: "
        elif "save_interval" in problem and args.save_interval is not None:
            prefix = f"--save-interval {args.save_interval}: "
        named.append(prefix + problem + hint)
    raise ConfigError(named, where="hook configuration; the job was not started")


def summary_lines(final: dict[str, Any], job_dir: Path, report: Path | None) -> list[str]:
    """What ``sdk-ext run`` prints at the end (``make demo`` shows it)."""
    from sdk_ext.local.jobs.preflight import no_data_note
    from sdk_ext.local.report.data import step_text, stop_decisions, verdict_step_modes, verdicts_of
    from sdk_ext.rules.status import coverage_gap, reason

    lines = [f"Job {final['TrainingJobName']}: {final['TrainingJobStatus']} ({final['SecondaryStatus']})"]
    if final.get("FailureReason"):
        lines.append("  FailureReason: " + final["FailureReason"].replace("\n", "\n    "))
    job = json.loads((job_dir / "job.json").read_text())
    verdicts = {v.rule: v for v in verdicts_of(job)}
    modes = verdict_step_modes(job_dir, [v.step for v in verdicts.values() if v.step is not None])
    for decision in stop_decisions(job_dir):
        for rule in decision.get("rules") or []:
            step = verdicts[rule].step if rule in verdicts else None
            lines.append(f"  rule {rule} stopped the job" + (f" at step {step_text(step, modes)}" if step is not None
                                                             else ""))
    for v in verdicts.values():
        why = reason(v.details)
        status = v.status
        gap = coverage_gap(v.details)
        if gap:
            status, why = f"NoIssuesFound, but it {gap[0]}", gap[1]
        lines.append(f"  {v.rule}: {status}" + (f" at step {step_text(v.step, modes)}" if v.step is not None else "")
                     + (f" ({why})" if why else ""))
    lines += cluster_lines(job, Path(job.get("SdkExtLocal", {}).get("TrialDir") or job_dir / "output" / "tensors"))
    no_data = no_data_note(job, job_dir)
    if no_data:
        lines.append(f"  no debugging data was saved: {no_data}")
    lines.append(f"  job directory: {job_dir}")
    if report is not None:
        lines.append(f"  report: {report.resolve()}")
    return lines


def _signal_name(number: int) -> str | None:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def worker_steps(trial_dir: Path) -> dict[str, int]:
    """Each worker's last saved step, from the trial's index file names (nothing is read)."""
    from sdk_ext.format.paths import INDEX_DIR, parse_index_key

    last: dict[str, int] = {}
    for path in (trial_dir / INDEX_DIR).glob("*/*.json"):
        parsed = parse_index_key(f"{INDEX_DIR}/{path.parent.name}/{path.name}")
        if parsed is not None:
            step, worker = parsed
            last[worker] = max(step, last.get(worker, step))
    return dict(sorted(last.items(), key=lambda kv: (len(kv[0]), kv[0])))


def cluster_lines(job: dict[str, Any], trial_dir: Path) -> list[str]:
    """A job of several hosts or processes: how they ran and ended, and each worker's last saved step."""
    local = job.get("SdkExtLocal") or {}
    hosts, processes, launch = local.get("Hosts") or [], local.get("Processes") or [], local.get("Launcher") or {}
    lines: list[str] = []
    if len(hosts) > 1 or len(processes) > 1:
        codes: dict[str, int] = {}
        for p in processes:
            code = p.get("ExitCode")
            killer = _signal_name(-code) if code is not None and code < 0 else None
            key = "still running" if code is None else f"ended by {killer}" if killer else f"exit code {code}"
            codes[key] = codes.get(key, 0) + 1
        ended = ", ".join(f"{n} {key}" for key, n in codes.items())
        lines.append(f"  {len(hosts)} host{'s' if len(hosts) != 1 else ''} x {launch.get('ProcessesPerHost', 1)} "
                     f"process{'es' if launch.get('ProcessesPerHost', 1) != 1 else ''} ({launch.get('Kind')}, "
                     f"chosen by {launch.get('ChosenBy')}): {ended}")
    steps = worker_steps(trial_dir)
    if len(steps) > 1:
        if len(set(steps.values())) == 1:
            lines.append(f"  {len(steps)} workers saved ({', '.join(steps)}), each up to step {next(iter(steps.values()))}")
        else:
            lines.append(f"  {len(steps)} workers saved, last step: " + ", ".join(f"{w} {s}" for w, s in steps.items()))
    return lines


class _Watcher:
    """Shows the job's live state on the status line (terminal only): see progress.py."""

    def __init__(self, runner: Any, console: Console) -> None:
        self.runner = runner
        self.console = console
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sdk-ext status", daemon=True)

    def start(self) -> None:
        if self.console.interactive:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        from sdk_ext.local.cli.progress import Clock, Seen, TrialWatch, status_line

        clock, watch, seen, tick = Clock(), TrialWatch(self.runner.trial_dir), Seen(), 0
        while not self._stop.wait(0.25):
            if tick % 4 == 0:  # the trial once a second; the job state and the clock four times
                seen = watch.seen()
            tick += 1
            self.console.status(status_line(self.runner.job.describe(), seen, clock.elapsed()))
