"""Run one CreateTrainingJob request on this machine, the way SageMaker would run it.

:class:`JobRunner` prepares the job directory (layout.py), starts one rule evaluator per
DebugRuleConfiguration and the entry point, supervises them on the calling thread, and keeps the
job's DescribeTrainingJob state (job.py), which every change turns into a state-change event
(events.py). The runner ends when training has ended *and* every rule evaluation has ended: no
child outlives :meth:`JobRunner.run`, whatever happens (a crash or Ctrl-C in the runner included).

What a local request runs, and how a failure reads: entry.py.

End of training: exit code 0 -> Completed; non-zero -> Failed, FailureReason from ``output/failure``
if the script wrote one, else the training toolkit's ``AlgorithmError: ExecuteUserScriptError`` text
with the script's last error line; after StopTrainingJob (SIGTERM to the entry point's process
group, SIGKILL after ``stop_grace``) or ``StoppingCondition.MaxRuntimeInSeconds`` -> Stopped. Then
the runner writes ``training_job_end.ts`` into the trial (SageMaker does; the hook does not inside a
job), gives the rules ``rule_timeout`` seconds to finish the steps left, and stops those still running.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.jobs import deployment, frameworks, layout, rule_jobs
from sdk_ext.local.jobs.entry import Command, check_paths, check_request, failure_reason, resolve_command
from sdk_ext.local.jobs.events import EventDispatcher, Target, state_change_event, to_json
from sdk_ext.local.jobs.processes import Child, stop_all
from sdk_ext.local.jobs.state import JobStateError, LocalJob, utc_now

logger = logging.getLogger(__name__)



@dataclass(frozen=True, kw_only=True)
class LocalSettings:
    """How local jobs run. Times in seconds.

    Attributes:
        jobs_root: each job's directory is ``jobs_root/<TrainingJobName>`` (unless a job dir is given).
        python: the interpreter for Python entry points and rule evaluators.
        poll_interval: how often the supervisor checks its children and the rules' status files.
        rule_poll_interval: the evaluators' ``--poll-interval`` (how often they look for new steps).
        stop_grace: SIGTERM to SIGKILL, when a job is stopped (SageMaker gives 120 s).
        rule_timeout: how long rules may keep evaluating after training ended before they are stopped.
        rule_stop_grace: SIGTERM to SIGKILL for rule evaluators.
        region, account: for ARNs and events.
        rules_dir, lambda_dir: a directory holding another evaluate.py to run instead of sdk_ext.evaluator;
            where auto_stop.py is (deployment.py finds them).
        auto_stop: deliver events to lambda/auto_stop.py's handler (with ``auto_stop_config``).
        auto_stop_config: an ``AutoStopConfig``; None: any Debugger rule may stop any job.
        targets: more event targets (callables taking the event), after the auto-stop handler.
        output: gets each line the entry point prints (it always goes to logs/training.log too).
        now: the clock for the job's timestamps.
    """

    jobs_root: Path = Path("sdk-ext-jobs")
    python: str = sys.executable
    poll_interval: float = 0.05
    rule_poll_interval: float = 0.2
    stop_grace: float = 10.0
    rule_timeout: float = 60.0
    rule_stop_grace: float = 5.0
    region: str = "local"
    account: str = "000000000000"
    rules_dir: Path | None = None
    lambda_dir: Path | None = None
    auto_stop: bool = True
    auto_stop_config: Any = None
    targets: Sequence[Target] = ()
    output: Callable[[str], None] | None = None
    now: Callable[[], datetime] = field(default=utc_now)


class JobRunner:
    """Runs one local training job (see the module docstring).

    Args:
        request: the CreateTrainingJob request (e.g. from ``apply_debugger``).
        settings: how to run it.
        client: the SageMaker-like client the auto-stop handler calls (client.py's; it owns this runner).
        job_dir: the job directory (default ``settings.jobs_root / TrainingJobName``); must not hold a job yet.
        entry_point, script_args, zero_change: see the module docstring.
    """

    def __init__(self, request: Mapping[str, Any], *, settings: LocalSettings, client: Any = None,
                 job_dir: str | os.PathLike[str] | None = None, entry_point: str | os.PathLike[str] | None = None,
                 script_args: Sequence[str] = (), zero_change: bool | None = None) -> None:
        check_request(request)
        self.request = dict(request)
        self.settings = settings
        self.client = client
        name = self.request["TrainingJobName"]
        # absolute: children run in other working directories
        self.dir = layout.JobDir((Path(job_dir) if job_dir is not None else settings.jobs_root / name).resolve())
        check_paths(self.dir, self.request)  # nothing of the job may land outside its directory
        self.entry_point = entry_point
        self.script_args = list(script_args)
        # None: as the request's Environment says (SDK_EXT_ZERO_CHANGE), else by the script's imports
        self.zero_change = zero_change if zero_change is not None else \
            frameworks.requested(self.request.get("Environment"))
        self.arn = f"arn:aws:sagemaker:{settings.region}:{settings.account}:training-job/{name.lower()}"
        self.trial_dir = layout.trial_dir(self.dir, self.request).resolve()
        self._wake = threading.Event()
        self._children: list[Child] = []
        self._training: Child | None = None
        self._rules: list[rule_jobs.RuleProcess] = []
        self._command: Command | None = None
        self._channels: dict[str, Path] = {}
        self._rule_arns = self._arns("DebugRuleConfigurations")
        self.dispatcher = EventDispatcher([], log_path=self.dir.events)
        self.job = LocalJob(self.request, arn=self.arn, rule_arns=self._rule_arns,
                            profiler_rule_errors=self._arns("ProfilerRuleConfigurations"), now=settings.now,
                            on_change=self._on_change)

    def _arns(self, key: str) -> dict[str, str]:
        s, name = self.settings, self.request["TrainingJobName"]
        return {r["RuleConfigurationName"]: f"arn:aws:sagemaker:{s.region}:{s.account}:processing-job/"
                f"{rule_jobs.processing_job_name(name, r['RuleConfigurationName'])}"
                for r in self.request.get(key) or []}

    @property
    def name(self) -> str:
        return self.job.name

    def prepare(self) -> None:
        """Create the job directory and resolve the entry point (errors here mean: nothing started).

        Raises:
            ConfigError: a bad request, a missing entry point, a job directory already used, no evaluate.py.
        """
        if self.dir.job_json.exists():
            raise ConfigError(f"{self.dir.root} already holds a job (job.json); choose another job name or "
                              "directory", where="local job")
        if self.request.get("DebugRuleConfigurations"):
            self._evaluator = deployment.evaluator_command(self.settings.rules_dir)
        self._command = resolve_command(self.request, self.dir, python=self.settings.python,
                                        entry_point=self.entry_point, script_args=self.script_args,
                                        zero_change=self.zero_change)
        if self.zero_change is not None:  # request.json says how it ran, so that running it again does the same
            environment = dict(self.request.get("Environment") or {})
            environment[frameworks.ENV] = "1" if self.zero_change else "0"
            self.request["Environment"] = environment
        self._channels = layout.prepare(self.dir, self.request)
        targets: list[Target] = []
        if self.settings.auto_stop:
            from sdk_ext.local.jobs.events import AutoStopTarget

            module = deployment.load_auto_stop(self.settings.lambda_dir)
            targets.append(AutoStopTarget(self.client, config=self.settings.auto_stop_config, module=module))
        self.dispatcher.targets = [*targets, *self.settings.targets]
        self._save()

    # --- the state the client sees ------------------------------------------------------------------

    def _on_change(self, describe: dict[str, Any]) -> None:
        self.dispatcher.put(state_change_event(describe, region=self.settings.region,
                                               account=self.settings.account))

    def stop(self) -> None:
        """StopTrainingJob: Stopping now; the supervisor sends SIGTERM at once.

        Raises:
            JobStateError: the job is not InProgress.
        """
        self.job.request_stop()
        self._wake.set()

    def _save(self) -> None:
        """job.json: the DescribeTrainingJob view plus local facts (pids, paths, rule steps)."""
        local = {
            "JobDir": str(self.dir.root), "TrialDir": str(self.trial_dir),
            "Command": self._command.argv if self._command else None,
            "TrainingPid": self._training.pid if self._training else None,
            "TrainingExitCode": self._training.poll() if self._training else None,
            "Rules": {r.name: {"Step": state.step, "Pid": r.child.pid, "ExitCode": r.child.poll(),
                               "StatusFile": str(r.status_path), "Log": str(r.child.log_path)}
                      for r in self._rules if (state := self.job.rules().get(r.name)) is not None},
        }
        layout.write_json(self.dir.job_json, {**to_json(self.job.describe()), "SdkExtLocal": local})

    # --- supervision --------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        """Run the job to its end on this thread. Returns the final DescribeTrainingJob response.

        Call :meth:`prepare` first. A KeyboardInterrupt stops the job (Stopped); any other error in
        the runner fails it (FailureReason ``InternalServerError: ...``); both end every child and
        are re-raised.
        """
        if self._command is None:
            raise RuntimeError("JobRunner.prepare() must be called before run()")
        self.dispatcher.start()
        try:
            self._start_rules()
            self._train()
            layout.write_end_marker(self.trial_dir)
            self._save()
            self._finish_rules()
        except BaseException as err:
            self._abort(err)
            raise
        finally:
            stop_all(self._children, self.settings.rule_stop_grace)
            self._refresh_rules(final=True)
            self._save()
            self.dispatcher.close()
            self.job.mark_done()
        return self.job.describe()

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], cwd: Path, log: Path,
               sink: Callable[[str], None] | None, death_signal: int) -> Child:
        child = Child(name, argv, env=env, cwd=cwd, log_path=log, sink=sink, parent_death_signal=death_signal,
                      python=self.settings.python)
        self._children.append(child)
        child.start()
        return child

    def _start_rules(self) -> None:
        env = rule_jobs.evaluator_env(os.environ, deployment.child_pythonpath(os.environ.get("PYTHONPATH")))
        for rule in self.request.get("DebugRuleConfigurations") or []:
            name = rule["RuleConfigurationName"]
            out = self.dir.rule_dir(name)
            out.mkdir(parents=True, exist_ok=True)
            argv = rule_jobs.evaluator_argv(
                python=self.settings.python, evaluator=self._evaluator, trial_dir=self.trial_dir,
                output_dir=out, rule_configuration_name=name,
                rule_parameters=rule_jobs.describe_rule_parameters(rule),
                poll_interval=self.settings.rule_poll_interval)
            try:
                child = self._spawn(f"rule {name}", argv, env, out, out / "evaluator.log", None, signal.SIGKILL)
            except OSError as err:
                self.job.update_rule(name, status="Error", details=f"InternalError: {err}")
                continue
            self._rules.append(rule_jobs.RuleProcess(name, child, out))
        self._save()

    def _train(self) -> None:
        assert self._command is not None
        command = self._command
        base = dict(os.environ)
        base["PYTHONPATH"] = deployment.child_pythonpath(os.environ.get("PYTHONPATH"))
        env = layout.training_env(self.dir, self.request, arn=self.arn, channels=self._channels,
                                  entry_point=command.entry_point, module_dir=command.cwd,
                                  user_args=command.user_args, base=base)
        if self.job.stop_requested:
            self.job.training_ended()
            return
        try:
            self._training = self._spawn("training", command.argv, env, command.cwd, self.dir.training_log,
                                         self.settings.output, signal.SIGTERM)
        except OSError as err:
            self.job.training_ended(failure_reason=f"AlgorithmError: {err}")
            return
        self.job.training_started()
        self._save()
        max_runtime = (self.request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
        started = time.monotonic()
        while (code := self._training.poll()) is None:
            self._wake.wait(self.settings.poll_interval)
            self._wake.clear()
            self._refresh_rules()
            if max_runtime and time.monotonic() - started > float(max_runtime) and not self.job.stop_requested:
                try:
                    self.job.request_stop(secondary="MaxRuntimeExceeded")
                except JobStateError:
                    pass
            if self.job.stop_requested:
                self._training.terminate()
                self._training.escalate(self.settings.stop_grace)
        reason = None if code == 0 or self.job.stop_requested else \
            failure_reason(code, command, self.dir, self._training.output_tail())
        self.job.training_ended(failure_reason=reason)

    def _finish_rules(self) -> None:
        """After training: let the rules finish the steps left, for up to ``rule_timeout`` seconds."""
        deadline = time.monotonic() + self.settings.rule_timeout
        while any(r.child.poll() is None for r in self._rules):
            self._refresh_rules()
            if time.monotonic() >= deadline:
                late = [r for r in self._rules if r.child.poll() is None]
                logger.warning("job %s: rules %s still running %.0f s after training ended; stopping them",
                               self.name, [r.name for r in late], self.settings.rule_timeout)
                for r in late:
                    r.timed_out = True
                stop_all([r.child for r in late], self.settings.rule_stop_grace)
                break
            self._wake.wait(self.settings.poll_interval)
            self._wake.clear()
        self._refresh_rules(final=True)

    def _refresh_rules(self, *, final: bool = False) -> None:
        changed = False
        for r in self._rules:
            code = r.child.poll()
            current = self.job.rules()[r.name]
            if current.status in ("NoIssuesFound", "IssuesFound", "Error", "Stopped"):
                continue
            seen = r.final_status(code) if code is not None else r.read_if_changed()
            if seen is None:
                continue
            details = seen.details
            if seen.status == "Error" and details and "No debugging data" in details:
                details = f"{details.rstrip()} Why: {self._no_data_reason()}"
            changed |= self.job.update_rule(r.name, status=seen.status, details=details, step=seen.step,
                                            modified=seen.modified)
        if changed or final:
            self._save()

    def _no_data_reason(self) -> str:
        from sdk_ext.local.jobs.preflight import no_data_reason

        hook = self.request.get("DebugHookConfig") or {}
        return no_data_reason(training_log=self.dir.training_log,
                              command=self._command.argv if self._command else None,
                              save_interval=(hook.get("HookParameters") or {}).get("save_interval"),
                              status=self.job.describe()["TrainingJobStatus"])

    def _abort(self, err: BaseException) -> None:
        """The runner itself failed or was interrupted: end every child, record why."""
        logger.error("job %s: the local runner %s; ending the job", self.name,
                     "was interrupted" if isinstance(err, KeyboardInterrupt) else f"failed: {err!r}")
        if isinstance(err, KeyboardInterrupt):
            try:
                self.job.request_stop()
            except JobStateError:
                pass
        stop_all(self._children, min(self.settings.stop_grace, 5.0))
        self.job.training_ended(failure_reason=f"InternalServerError: the local runner failed: "
                                f"{type(err).__name__}: {err}")
        layout.write_end_marker(self.trial_dir)
