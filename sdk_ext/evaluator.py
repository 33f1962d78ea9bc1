"""Rule evaluator: runs one rule live against a training job's trial and reports a status.

``python -m sdk_ext.evaluator`` and ``python rules/evaluate.py`` (the rule container's entry point, a
thin wrapper) are the same program:

    python -m sdk_ext.evaluator --trial-dir PATH (--rule-name NAME | --source FILE.py --rule-to-invoke CLS)
        [--param k=v ...] [--other-trial PATH ...] [--start-step N] [--end-step M] [--action-json JSON]
        [--output-dir DIR] [--rule-configuration-name NAME] [--poll-interval SECONDS] [--no-actions]
        [--profiler] [--finished]

A profiler rule (LowGPUUtilization, ..., ProfilerReport; or a custom rule with ``--profiler``) reads the
job's profiler output instead (``--trial-dir``: a ``profiler-output/`` directory, a job directory holding
one, or an ``s3://`` prefix) in time windows (:mod:`sdk_ext.profiler.analysis.rules`), writes its report to
``<output-dir>/profiler-output/profiler-reports/<Rule>.json`` (ProfilerReport: every sub-rule's, and
``profiler-report.html``) and ends when the job's data has all been judged.

With no arguments at all it runs in container mode (SageMaker Processing paths; see rules/README.md).
``--param`` values are strings exactly as SageMaker's RuleParameters; the reserved keys
(``rule_to_invoke``, ``source_s3_uri``, ``other_trial_<i>``, ``start_step``, ``end_step``,
``action_json``, ``invoke_timeout_secs``) may be given as ``--param`` too, so a DebugRuleConfiguration's RuleParameters can
be passed verbatim.

``<output-dir>/status.json`` says InProgress from the start, then the outcome; the exit code
follows it: 0 NoIssuesFound, 3 IssuesFound, 2 Error, 4 Stopped (SIGTERM/SIGINT). The rule stops at
its first firing. The training job counts as ended when ``training_job_end.ts`` appears, or when
SageMaker's stop signal (``SAGEMAKER_ENV_RULE_STOP_SIGNAL_FILE``) plus ``rule_stop_grace_time_secs``
has passed (:mod:`sdk_ext.rules.stop_signal`). A rule stuck at one step ends in Error after
``invoke_timeout_secs`` (default 300; waiting for data does not count), and SIGTERM ends the process within
``SDK_EXT_RULE_TERM_GRACE_SECS`` (default 5) whatever the rule does (:mod:`sdk_ext.rules.time_limit`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from sdk_ext.exceptions import (  # light: no numpy; the rest is imported after the signal handlers
    ConfigError,
    RuleEvaluationConditionMet,
)

if TYPE_CHECKING:
    from sdk_ext.rules.time_limit import EvaluatorGuard

logger = logging.getLogger("sdk_ext.rules.evaluate")

CONTAINER_ROOT = "/opt/ml/processing"
CONTAINER_TRIAL_DIR = "/opt/ml/processing/input/tensors"
CONTAINER_OUTPUT_DIR = "/opt/ml/processing/output/rule"
CONTAINER_PARAMETERS_FILE = "/opt/ml/processing/input/config/rule_parameters.json"
CONTAINER_MESSAGE_FILE = "/opt/ml/output/message"
DEFAULT_POLL_INTERVAL = 0.2
EXIT_STOPPED, EXIT_ERROR = 4, 2


class Stop(BaseException):
    """SIGTERM/SIGINT arrived. A BaseException, so a rule's ``except Exception`` cannot swallow it."""


class ActionsInterrupted(BaseException):
    """SIGTERM/SIGINT arrived while the actions ran, after the final status was written."""


class UsageError(Exception):
    """Bad command-line arguments: main() prints it and exits 2. Never leaves this module, so it stays
    outside the SdkExtError root (which is what a library caller catches)."""


_guard: EvaluatorGuard | None = None  # set by main() once imported: forced exits of a stuck rule


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\n{self.format_usage()}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="evaluate.py", description="Run one SageMaker Debugger rule against a trial.")
    p.add_argument("--trial-dir", required=True, help="the trial: a local directory or s3://bucket/prefix")
    p.add_argument("--rule-name", help="a built-in rule, by its SageMaker name (e.g. VanishingGradient)")
    p.add_argument("--source", help="a custom rule's .py file (local path, file:// or s3:// URI)")
    p.add_argument("--rule-to-invoke", help="the custom rule's class name in --source")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a RuleParameter, value as a string; repeatable")
    p.add_argument("--other-trial", action="append", default=[], metavar="PATH",
                   help="another trial (other_trial_0, other_trial_1, ...); repeatable")
    p.add_argument("--start-step", help="first global step to evaluate (default 0)")
    p.add_argument("--end-step", help="stop before this global step (default: until training ends)")
    p.add_argument("--action-json", help="actions to run when the rule fires (StopTraining, SMS, Email)")
    p.add_argument("--output-dir", default=".", help="where status.json goes (default: current directory)")
    p.add_argument("--rule-configuration-name", help="name reported in status.json (default: the rule's name)")
    p.add_argument("--poll-interval", type=float, default=DEFAULT_POLL_INTERVAL,
                   help=f"seconds between checks for new steps (default {DEFAULT_POLL_INTERVAL})")
    p.add_argument("--no-actions", action="store_true", help="never run actions (also SDK_EXT_RULE_ACTIONS=0)")
    p.add_argument("--wait-timeout", type=float, metavar="SECONDS",
                   help="give up waiting for the trial's first data after this long (default: wait until the "
                   "training job ends, as SageMaker's evaluator does)")
    p.add_argument("--profiler", action="store_true",
                   help="--trial-dir is a job's profiler output (ProfilerRuleConfigurations; built-in profiler "
                   "rules imply it): a custom rule gets a ProfilerTrial as its base trial")
    p.add_argument("--finished", action="store_true",
                   help="profiler rules: the job has ended (saved output, maybe without its end marker); "
                   "evaluate what is there without waiting for more")
    return p


def _parameters_from_args(args: argparse.Namespace) -> dict[str, str]:
    """RuleParameters from --param plus the flags; a flag contradicting a --param is an error."""
    if not args.poll_interval > 0:
        raise UsageError(f"--poll-interval {args.poll_interval!r}: must be a positive number of seconds")
    if args.wait_timeout is not None and not args.wait_timeout >= 0:
        raise UsageError(f"--wait-timeout {args.wait_timeout!r}: must be a number of seconds >= 0")
    params: dict[str, str] = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param {item!r}: expected KEY=VALUE, e.g. --param threshold=0.0001")
        params[key.strip()] = value
    flags = {
        "rule_to_invoke": args.rule_name or args.rule_to_invoke,
        "source_s3_uri": args.source,
        "start_step": args.start_step,
        "end_step": args.end_step,
        "action_json": args.action_json,
    }
    if args.rule_name and (args.source or args.rule_to_invoke):
        raise UsageError("give either --rule-name (a built-in rule) or --source with --rule-to-invoke, not both")
    for key, value in flags.items():
        if value is None:
            continue
        if key in params and params[key] != value:
            raise UsageError(f"{key} is given twice with different values: {params[key]!r} (--param) and "
                             f"{value!r} (flag)")
        params[key] = value
    taken = sum(1 for k in params if k.startswith("other_trial_"))
    for i, path in enumerate(args.other_trial):
        params[f"other_trial_{taken + i}"] = path
    return params


def _in_container() -> bool:
    return bool(os.environ.get("RULE_PARAMETERS") or os.environ.get("RULE_PARAMETERS_FILE")
                or Path(CONTAINER_ROOT).is_dir())


def _container_config() -> tuple[dict[str, str], argparse.Namespace]:
    """Container mode: SageMaker Processing paths; RuleParameters from env or a JSON file."""
    raw = os.environ.get("RULE_PARAMETERS")
    source = "environment variable RULE_PARAMETERS"
    if raw is None:
        path = Path(os.environ.get("RULE_PARAMETERS_FILE", CONTAINER_PARAMETERS_FILE))
        source = str(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as err:
            raise UsageError(f"container mode: no RULE_PARAMETERS environment variable and cannot read {path} "
                             f"({err}); pass the RuleParameters as a JSON object in one of them") from err
    try:
        params = json.loads(raw)
    except ValueError as err:
        raise UsageError(f"container mode: {source} is not valid JSON ({err})") from err
    if not isinstance(params, dict):
        raise UsageError(f"container mode: {source} must hold a JSON object of RuleParameters")
    args = argparse.Namespace(
        trial_dir=os.environ.get("TRIAL_DIR", CONTAINER_TRIAL_DIR),
        output_dir=os.environ.get("RULE_OUTPUT_DIR", CONTAINER_OUTPUT_DIR),
        rule_configuration_name=os.environ.get("RULE_CONFIGURATION_NAME"),
        poll_interval=float(os.environ.get("RULE_POLL_INTERVAL", DEFAULT_POLL_INTERVAL)),
        no_actions=False,
        wait_timeout=None,
        profiler=bool(os.environ.get("S3_PATH")),  # the 2020 profiler rule image's variable for the data
        finished=False,
        profiler_data=os.environ.get("S3_PATH"),
    )
    return {str(k): _as_parameter_string(v) for k, v in params.items()}, args


def _as_parameter_string(value: object) -> str:
    """A JSON value as the string SageMaker would have sent: lists comma-joined, objects as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(_as_parameter_string(v) for v in value)
    if isinstance(value, (bool, int, float)):
        return str(value)
    return json.dumps(value)


class Evaluator:
    """One evaluation: status bookkeeping around sdk_ext.rules; ``run`` returns the exit code."""

    def __init__(self, output_dir: str, name: str | None, *, container: bool) -> None:
        self.output_dir, self.name, self.container = output_dir, name or "", container
        self.phase = "running"  # then "final" (status written; signals ignored) or "actions"
        self.unwritten: OSError | None = None  # why the last status could not be written, if it could not

    def report(self, status: str, details: str = "", step: int | None = None) -> int:
        from sdk_ext.rules.status import FINAL_STATUSES, RuleStatus, write_status

        final = status in FINAL_STATUSES
        if final:  # nothing may interrupt the final write; a late SIGTERM is then ignored
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            record = RuleStatus(self.name or "unknown", status, details, step)
            try:
                write_status(self.output_dir, record)
                self.unwritten = None
            except OSError as err:  # e.g. a full disk: the exit code still carries the outcome
                self.unwritten = err
                logger.error("rule %s: could not write %s (%s); the status %s is in the exit code (%d)",
                             self.name, Path(self.output_dir) / "status.json", err, status, record.exit_code)
            if final:
                self.phase = "final"
                if self.container:
                    _write_message(record.to_json()["StatusDetails"] or status)
        finally:
            if final:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
        log = logger.warning if status in ("IssuesFound", "Error") else logger.info
        log("rule %s: %s%s", self.name, status, f" — {details.strip()}" if details else "")
        return record.exit_code


def _write_message(text: str) -> None:
    """SageMaker Processing shows the first 1 KB of this file as the job's ExitMessage."""
    path = Path(os.environ.get("RULE_MESSAGE_FILE", CONTAINER_MESSAGE_FILE))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text[:1024], encoding="utf-8")
    except OSError:
        logger.warning("could not write %s", path, exc_info=True)


def _fetch_source(source: str, scratch: str) -> str:
    """A local path for a custom rule source given as a path, file:// (percent-decoded) or s3:// URI."""
    from sdk_ext.storage.uris import local_path

    try:
        path = local_path(source)
    except ValueError as err:
        raise UsageError(f"source_s3_uri: {err}") from err
    if path is not None:
        return path
    if not source.startswith("s3://"):
        raise UsageError(f"source_s3_uri {source!r}: give a local path, a file:// URI or an s3:// URI")
    from sdk_ext.storage import open_storage

    prefix, _, name = source.rpartition("/")
    target = Path(scratch) / (name or "rule.py")
    target.write_bytes(open_storage(prefix).read(name))
    return str(target)


def _open_trial(path: str, name: str, start: int, poll_interval: float, *, wait: bool = True,
                stop_signal: Any = None, wait_timeout: float | None = None) -> Any:
    """create_trial, waiting (with ``wait``, as long as the job has not ended, and at most
    ``wait_timeout`` seconds when given) for its first data.

    Other trials are finished jobs: they are not waited for beyond the reader's own timeout.

    Steps before ``start`` are hidden (``range_steps``, as SageMaker's evaluator does); steps from
    ``end_step`` on stay visible, so a live evaluation ends as soon as the job has passed ``end_step``
    instead of when it ends (invoke_rule never evaluates them). With ``stop_signal`` (a
    :class:`~sdk_ext.rules.stop_signal.StopSignal`), the job also ends when SageMaker's stop signal
    plus its grace period has passed.
    """
    from sdk_ext.exceptions import MissingCollectionFiles
    from sdk_ext.format.paths import END_OF_JOB
    from sdk_ext.rules.time_limit import untimed_sleep
    from sdk_ext.storage import Storage, open_storage
    from sdk_ext.trials import create_trial
    from sdk_ext.trials.options import Clock, TrialOptions

    # the trial's own waits (a rule calling trial.wait_for_steps, an event file still being written)
    # wait for the job: they never count against invoke_timeout_secs
    options = TrialOptions.from_env(os.environ, poll_interval=poll_interval, clock=Clock(sleep=untimed_sleep))
    storage: Storage = open_storage(path.strip())
    if stop_signal is not None:
        from sdk_ext.rules.stop_signal import StopSignalStorage

        storage = StopSignalStorage(storage, stop_signal)
    warned = False
    deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
    while True:
        try:
            return create_trial(storage, name=name, range_steps=(start, None), options=options)
        except MissingCollectionFiles as err:
            if not wait or storage.exists(END_OF_JOB):
                raise
            if deadline is not None and time.monotonic() >= deadline:
                raise MissingCollectionFiles(f"no data appeared under {path} within {wait_timeout:g} s "
                                             f"(--wait-timeout); is it the trial's path? ({err})") from err
            if not warned:
                logger.info("waiting for the training job to write its first data under %s", path)
                warned = True
            time.sleep(poll_interval)


def run(args: argparse.Namespace, params: dict[str, str], evaluator: Evaluator) -> int:
    from sdk_ext.exceptions import DamagedDataError, MissingCollectionFiles, NoMoreData
    from sdk_ext.rules.factory import build_rule, load_rule_class, smdebug_aliases, split_parameters
    from sdk_ext.rules.rule_invoker import invoke_rule
    from sdk_ext.rules.status import no_issues_details
    from sdk_ext.rules.stop_signal import StopSignal
    from sdk_ext.rules.time_limit import InvocationTimeout

    request = split_parameters(params)
    if not request.rule_to_invoke:
        raise UsageError("no rule given: pass --rule-name NAME, or --source FILE.py with --rule-to-invoke CLASS "
                         "(RuleParameter rule_to_invoke)")
    evaluator.name = evaluator.name or request.rule_to_invoke
    evaluator.report("InProgress", "Rule evaluation started")
    profiler_rule = None
    if not request.source:
        from sdk_ext.profiler.analysis.rules import find_profiler_rule

        profiler_rule = find_profiler_rule(request.rule_to_invoke)
        if profiler_rule is not None:
            return run_profiler_rule(args, request, evaluator, profiler_rule)
    with tempfile.TemporaryDirectory(prefix="sdk-ext-rule-") as scratch, smdebug_aliases():
        if request.source:
            cls = load_rule_class(_fetch_source(request.source, scratch), request.rule_to_invoke)
            if getattr(args, "profiler", False):  # a custom profiler rule: its base trial is the profiler output
                return run_profiler_rule(args, request, evaluator, cls)
        else:
            from sdk_ext.rules.builtin import get_builtin_rule

            cls = get_builtin_rule(request.rule_to_invoke)
        try:
            stop_signal = StopSignal.from_env(os.environ)
            base = _open_trial(args.trial_dir, "base_trial", request.start_step, args.poll_interval,
                               stop_signal=stop_signal, wait_timeout=getattr(args, "wait_timeout", None))
            others = [_open_trial(p, f"other_trial_{i}", request.start_step, args.poll_interval, wait=False)
                      for i, p in enumerate(request.other_trials)]
        except MissingCollectionFiles as err:
            return evaluator.report("Error", "ClientError: No debugging data was saved by the training job. Check "
                                    "that the debugger hook was configured correctly before starting the training "
                                    f"job. Exception: {err}")
        try:
            rule = build_rule(cls, base, request.parameters, other_trials=others, action_str=request.action_json)
        except ConfigError as err:
            return evaluator.report("Error", f"ClientError: {err}")
        rule.defer_actions = True
        if _guard is not None:  # a rule that swallows InvocationTimeout is ended by the watchdog
            _guard.on_stuck(lambda err: evaluator.report("Error", f"RuleTimeout: {err}", err.step))
        try:
            invoke_rule(rule, request.start_step, request.end_step, raise_eval_cond=True,
                        poll_interval=args.poll_interval, time_limit=request.time_limit or 0)
        except InvocationTimeout as err:
            return evaluator.report("Error", f"RuleTimeout: {err}", err.step)
        except DamagedDataError as err:  # never a pass: the rule could not read what it was asked to judge
            at = f" at step {err.step}" if err.step is not None else ""
            return evaluator.report("Error", f"DamagedData: the rule could not read the data it was to judge{at}: {err}",
                                    err.step)
        except RuleEvaluationConditionMet as fired:
            return _issues_found(evaluator, rule, fired, args)
        except NoMoreData as end:
            how = "Training ended"
            from sdk_ext.rules.stop_signal import StopSignalStorage

            stopper = base.storage if isinstance(base.storage, StopSignalStorage) else None
            if stopper is not None and stopper.ended_by_signal:
                how += f" ({stopper.describe()})"
            return evaluator.report("NoIssuesFound", no_issues_details(f"{how}; last saved step: {end.last_step}",
                                                                       *_coverage_notes(rule)))
        return evaluator.report("NoIssuesFound", no_issues_details(f"Reached end_step {request.end_step}",
                                                                   *_coverage_notes(rule)))


def _issues_found(evaluator: Evaluator, rule: Any, fired: RuleEvaluationConditionMet, args: argparse.Namespace) -> int:
    """Report IssuesFound, then run the rule's actions (the stop, the notification) unless told not to."""
    code = evaluator.report("IssuesFound", f"RuleEvaluationConditionMet: {fired}\n", fired.step)
    if not args.no_actions and os.environ.get("SDK_EXT_RULE_ACTIONS", "1") != "0":
        evaluator.phase = "actions"
        try:
            rule.run_actions(str(fired))
        except ActionsInterrupted:
            logger.warning("actions interrupted by a signal; the status stays IssuesFound")
    return code


def run_profiler_rule(args: argparse.Namespace, request: Any, evaluator: Evaluator, cls: Any) -> int:
    """A profiler rule over the job's profiler output (``--trial-dir``: a profiler-output/ directory, a job
    directory holding one, or an s3:// prefix). Its reports go to ``<output-dir>/profiler-output/
    profiler-reports/<Rule>.json`` (SageMaker's layout under the rule's output); ``start_step``/``end_step``
    do not apply (a profiler rule walks time, not steps)."""
    from datetime import datetime, timezone

    from sdk_ext.format.profiler_paths import PROFILER_OUTPUT_DIR
    from sdk_ext.profiler.profiler_trial import ProfilerTrial, profiler_root
    from sdk_ext.rules.factory import build_rule
    from sdk_ext.rules.rule_invoker import invoke_rule
    from sdk_ext.rules.status import no_issues_details
    from sdk_ext.rules.stop_signal import StopSignal, StopSignalStorage
    from sdk_ext.rules.time_limit import InvocationTimeout
    from sdk_ext.storage import open_storage

    output = Path(args.output_dir) / PROFILER_OUTPUT_DIR
    storage = open_storage(profiler_root((getattr(args, "profiler_data", None) or args.trial_dir).strip()))
    stop_signal = StopSignal.from_env(os.environ)
    expired: Any = StopSignalStorage(storage, stop_signal).signal_expired if stop_signal is not None else None
    if getattr(args, "finished", False):
        expired = lambda: True  # noqa: E731 - the saved output is all there is
    trial = ProfilerTrial(storage, output_dir=output, poll_interval=args.poll_interval, signal_expired=expired)
    try:
        rule = build_rule(cls, trial, request.parameters, action_str=request.action_json)
    except ConfigError as err:
        return evaluator.report("Error", f"ClientError: {err}")
    if not trial.wait_for_first_data():
        return evaluator.report("Error", "ClientError: No profiler data was saved by the training job. Check that "
                                "profiling was on (ProfilerConfig with DisableProfiler false) and that "
                                f"{trial.path} is the job's profiler output (system/ and framework/ below it).")
    if hasattr(rule, "on_report"):  # ProfilerReport: draw profiler-report.html beside the rules' reports
        rule.on_report = _profiler_html_writer(output, trial.path)
    rule.defer_actions = True
    if _guard is not None:
        _guard.on_stuck(lambda err: evaluator.report("Error", f"RuleTimeout: {err}", err.step))
    try:
        invoke_rule(rule, 0, None, raise_eval_cond=True, poll_interval=args.poll_interval,
                    time_limit=request.time_limit or 0)
    except InvocationTimeout as err:
        return evaluator.report("Error", f"RuleTimeout: {err}", err.step)
    except RuleEvaluationConditionMet as fired:
        return _issues_found(evaluator, rule, fired, args)
    until = datetime.fromtimestamp(trial.last_timestamp() / 1e6, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return evaluator.report("NoIssuesFound", no_issues_details(
        f"Training ended; profiler data evaluated up to {until} in {getattr(rule, 'windows', 0)} windows",
        *_coverage_notes(rule)))


def _profiler_html_writer(output: Path, profiler_data: str) -> Any:
    """The callback that redraws ``<output>/profiler-report.html`` after each window of ProfilerReport."""
    from sdk_ext.local.report.profiling import write_profiler_page

    def draw(reports_dir: Path) -> None:
        write_profiler_page(profiler_data, reports_dir, output / "profiler-report.html")

    return draw


def _coverage_notes(rule: Any) -> tuple[str | None, str | None]:
    """Why the rule checked nothing, or which of its checks did not, if it knows (built-in rules do; a
    custom rule cannot tell)."""
    notes = []
    for method in ("coverage_note", "part_coverage_note"):
        note = getattr(rule, method, None)
        notes.append(note() if callable(note) else None)
    return notes[0], notes[1]


def _on_signal(evaluator: Evaluator) -> Any:
    def handler(signum: int, frame: object) -> None:
        if _guard is not None and evaluator.phase in ("running", "actions"):  # ends us even if the rule won't
            _guard.arm(evaluator)
        if evaluator.phase == "running":
            raise Stop(signal.Signals(signum).name)
        if evaluator.phase == "actions":
            raise ActionsInterrupted(signal.Signals(signum).name)

    return handler


def main(argv: Sequence[str] | None = None) -> int:
    global _guard
    argv = list(sys.argv[1:] if argv is None else argv)
    container = not argv and _in_container()
    if not argv and not container:
        _parser().print_usage(sys.stderr)
        print("evaluate.py: no arguments and not in a rule container (no RULE_PARAMETERS, RULE_PARAMETERS_FILE "
              "or /opt/ml/processing); see rules/README.md", file=sys.stderr)
        return EXIT_ERROR
    evaluator = Evaluator(CONTAINER_OUTPUT_DIR if container else ".", None, container=container)
    previous = {s: signal.signal(s, _on_signal(evaluator)) for s in (signal.SIGTERM, signal.SIGINT)}
    logging.basicConfig(level=os.environ.get("SDK_EXT_LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        try:
            from sdk_ext.rules.time_limit import EvaluatorGuard

            _guard = EvaluatorGuard()
            if container:
                params, args = _container_config()
            else:
                args = _parser().parse_args(argv)
                params = _parameters_from_args(args)
            evaluator.output_dir = args.output_dir
            evaluator.name = args.rule_configuration_name or ""
            return run(args, params, evaluator)
        except UsageError as err:
            _salvage_output_dir(argv, evaluator)
            return evaluator.report("Error", f"ClientError: {err}")
        except ConfigError as err:
            return evaluator.report("Error", f"ClientError: {err}")
        except Stop:
            return evaluator.report("Stopped", "Rule evaluation stopped by a signal")
        except Exception as err:  # noqa: BLE001 - every failure must end as an Error status
            details = f"{'ClientError' if isinstance(err, ValueError) else 'InternalError'}: " \
                      f"{type(err).__name__}: {err}\n{traceback.format_exc()}"
            return evaluator.report("Error", details)
    except Stop:  # a signal while reporting a non-final status
        return evaluator.report("Stopped", "Rule evaluation stopped by a signal")
    finally:
        if _guard is not None:
            _guard.on_stuck(None)  # the evaluation is over: a later invocation in this process is a library call
        for s, h in previous.items():
            signal.signal(s, h)


def _salvage_output_dir(argv: list[str], evaluator: Evaluator) -> None:
    """After a usage error, still find --output-dir / --rule-configuration-name to report in."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--output-dir")
    p.add_argument("--rule-configuration-name")
    p.add_argument("--rule-name")
    p.add_argument("--rule-to-invoke")
    known, _ = p.parse_known_args(argv)
    if known.output_dir:
        evaluator.output_dir = known.output_dir
    evaluator.name = evaluator.name or known.rule_configuration_name or known.rule_name or known.rule_to_invoke or ""


if __name__ == "__main__":
    sys.exit(main())
