"""Run one CreateTrainingJob request on this machine, the way SageMaker would run it.

:class:`JobRunner` claims the job's name (claim.py: atomically, ``runner.json``), prepares the job
directory (layout.py; a ``.tar.gz`` submit directory through archive.py), starts one rule evaluator per
DebugRuleConfiguration and the entry point, each under its keeper (processes.py), supervises them on
the calling thread, and keeps the job's DescribeTrainingJob state (state.py), which every change turns
into a state-change event (events.py). The runner ends when training has ended *and* every rule
evaluation has ended: nothing a child started outlives :meth:`JobRunner.run`, whatever happens (a crash,
Ctrl-C or SIGKILL of the runner included; a later reader settles a job whose runner was killed).

What a local request runs, and how a failure reads: entry.py.

End of training: exit code 0 -> Completed; non-zero -> Failed, FailureReason from ``output/failure``
if the script wrote one, else the training toolkit's ``AlgorithmError: ExecuteUserScriptError`` text
with the script's last error line; after StopTrainingJob (SIGTERM to the entry point's process
group, SIGKILL after ``stop_grace``) or ``StoppingCondition.MaxRuntimeInSeconds`` -> Stopped; the job
directory's disk full -> Failed, naming the path (disk.py). Then the runner writes ``training_job_end.ts``
into the trial (SageMaker does; the hook does not inside a job), gives the rules ``rule_timeout`` seconds
to finish the steps left, and stops those still running.
"""

from __future__ import annotations

import logging
import os
import shutil
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
from sdk_ext.local.jobs import deployment, disk, frameworks, hosts, launcher, layout, rule_jobs
from sdk_ext.local.jobs.claim import Claim
from sdk_ext.local.jobs.entry import Command, check_paths, check_request, failure_reason, resolve_command
from sdk_ext.local.jobs.events import EventDispatcher, Target, state_change_event, to_json
from sdk_ext.local.jobs.processes import Child, stop_all
from sdk_ext.local.jobs.state import (
    TERMINAL_RULE_STATUSES,
    JobStateError,
    LocalJob,
    profiling_status,
    utc_now,
)

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
        profiler_rules_stop: profiler rules that find issues stop the job too (the auto-stop function's
            ``profiler_rules_can_stop``); without it only those whose ``action_json`` asks for StopTraining do.
        profiler_file_seconds: seconds of system metrics per file (SageMaker's 60; a rule sees a file once
            it is complete, so tests that watch a live job use less).
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
    profiler_rules_stop: bool = False
    profiler_file_seconds: float = 60.0
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
        self._training: Child | None = None  # the first training process (rank 0, or algo-1's entry point)
        self._group: launcher.TrainingGroup | None = None  # every training process, on every host
        #: the emulated hosts (hosts.py), set by prepare(): one per ResourceConfig.InstanceCount, each with its
        #: name and /opt/ml directories; what runs once per host (a system monitor) starts from this list
        self.hosts: list[hosts.EmulatedHost] = []
        self.launch: launcher.LaunchPlan | None = None
        self._v3: launcher.V3Source | None = None
        self._monitor: Child | None = None  # the system monitor, while profiling is on
        self._profiling_changed = True  # the supervisor looks at ProfilerConfig at its next turn
        self._profiling_ended = False
        self._rules: list[rule_jobs.RuleProcess] = []
        self._command: Command | None = None
        self._channels: dict[str, Path] = {}
        self._claim: Claim | None = None
        self._disk = disk.Watch(self.dir.root, self.trial_dir, on_full=self._on_disk_full)
        self._rule_arns = self._arns("DebugRuleConfigurations")
        self._pending_profiler_rules: list[dict[str, Any]] = []  # added by UpdateTrainingJob; started by run()
        self._evaluator: list[str] | None = None  # the rule evaluator's command (deployment.evaluator_command)
        profiler_arns = self._arns("ProfilerRuleConfigurations")
        skipped = {r["RuleConfigurationName"]: why for r in self.request.get("ProfilerRuleConfigurations") or []
                   if (why := rule_jobs.not_evaluated_locally(r)) is not None}
        self.dispatcher = EventDispatcher([], log_path=self.dir.events)
        self.job = LocalJob(self.request, arn=self.arn, rule_arns=self._rule_arns,
                            profiler_rule_arns={n: a for n, a in profiler_arns.items() if n not in skipped},
                            profiler_rule_errors={n: (profiler_arns[n], why) for n, why in skipped.items()},
                            now=settings.now, on_change=self._on_change)

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

        The job directory is claimed first (claim.py: atomic, so of two runs of one name at the same
        moment one is refused); if anything here fails the claim is given back and what it made removed.

        Raises:
            ConfigError: a bad request, a missing entry point, no evaluate.py; JobExistsError (one) for a job
                directory already used.
            DiskFullError: the job directory's file system is full.
        """
        try:
            self._claim = Claim.take(self.dir.root)
            try:
                self._prepare()
            except BaseException:
                self._unprepare()
                raise
        except OSError as err:
            if disk.is_full(err) and not isinstance(err, disk.DiskFullError):
                raise disk.DiskFullError(err, err.filename, self.dir.root) from err
            raise

    def _unprepare(self) -> None:
        """Nothing ran: remove what prepare made (all of the directory if it made the directory)."""
        assert self._claim is not None
        if self._claim.created_dir:
            shutil.rmtree(self.dir.root, ignore_errors=True)
        else:
            shutil.rmtree(self.dir.root / "code", ignore_errors=True)
            self._disk.reserve.give_back()
        self._claim.release()
        self._claim = None

    def _prepare(self) -> None:
        if self.request.get("DebugRuleConfigurations") or self.request.get("ProfilerRuleConfigurations"):
            self._evaluator = deployment.evaluator_command(self.settings.rules_dir)
        self._command = resolve_command(self.request, self.dir, python=self.settings.python,
                                        entry_point=self.entry_point, script_args=self.script_args,
                                        zero_change=self.zero_change)
        if self.zero_change is not None:  # request.json says how it ran, so that running it again does the same
            environment = dict(self.request.get("Environment") or {})
            environment[frameworks.ENV] = "1" if self.zero_change else "0"
            self.request["Environment"] = environment
        self._v3 = launcher.v3_source(self.request)
        self.hosts = hosts.plan_hosts(self.dir.root, self.request, gpus=hosts.visible_gpus(os.environ),
                                      cpus=hosts.usable_cpus())
        self.launch = launcher.choose(self.request, host=self.hosts[0], v3=self._v3)  # ConfigError: cannot run here
        self._channels = layout.prepare(self.dir, self.request)
        for host in self.hosts:
            hosts.prepare_host(host, self.dir.config, self.dir.data)
        self._disk.reserve.take()  # DiskFullError: not even the job's last words would fit
        targets: list[Target] = []
        if self.settings.auto_stop:
            from sdk_ext.local.jobs.events import AutoStopTarget

            module = deployment.load_auto_stop(self.settings.lambda_dir)
            config = self.settings.auto_stop_config
            if config is None:
                config = rule_jobs.auto_stop_config(module, self.request,
                                                    profiler_rules_stop=self.settings.profiler_rules_stop)
            targets.append(AutoStopTarget(self.client, config=config, module=module))
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

    def update_profiler(self, profiler_config: Mapping[str, Any] | None,
                        profiler_rules: list[dict[str, Any]] | None = None) -> None:
        """UpdateTrainingJob: the new ProfilerConfig goes to DescribeTrainingJob and to the container's
        profilerconfig.json, which the system monitor and the hooks follow; the supervisor starts the
        monitor if profiling was off.

        Raises:
            JobStateError: the job is not InProgress.
        """
        known = {r["RuleConfigurationName"] for r in self.request.get("ProfilerRuleConfigurations") or []}
        merged = self.job.update_profiler(profiler_config, profiler_rules)
        layout.write_profiler_config(self.dir, merged)
        self.request["ProfilerConfig"] = merged
        for rule in profiler_rules or []:
            name = rule["RuleConfigurationName"]
            if name in known:
                continue
            self.request.setdefault("ProfilerRuleConfigurations", []).append(rule)
            self.job.add_profiler_rule(name, self._arns("ProfilerRuleConfigurations")[name])
            why = rule_jobs.not_evaluated_locally(rule)
            if why is not None:
                self.job.update_rule(name, status="Error", details=f"ClientError: {why}", profiler=True)
            else:
                self._pending_profiler_rules.append(rule)
        self._profiling_changed = True
        self._wake.set()

    def _save(self) -> None:
        """job.json: the DescribeTrainingJob view plus local facts (pids, paths, rule steps)."""
        local = {
            "JobDir": str(self.dir.root), "TrialDir": str(self.trial_dir),
            "Command": self._command.argv if self._command else None,
            "TrainingPid": self._training.pid if self._training else None,
            "TrainingExitCode": self._training.poll() if self._training else None,
            "MonitorPid": self._monitor.pid if self._monitor else None,
            "Hosts": [h.to_json() for h in self.hosts],
            "Launcher": {"Kind": self.launch.kind, "ProcessesPerHost": self.launch.processes_per_host,
                         "ChosenBy": self.launch.chosen_by} if self.launch else None,
            "Processes": self._group.describe() if self._group else [],
            "Rules": {r.name: {"Step": state.step, "Pid": r.child.pid, "ExitCode": r.child.poll(),
                               "StatusFile": str(r.status_path), "Log": str(r.child.log_path)}
                      for r in self._rules if not r.profiler and (state := self.job.rules().get(r.name)) is not None},
            "ProfilerRules": {r.name: {"Pid": r.child.pid, "ExitCode": r.child.poll(), "OutputDir": str(r.output_dir),
                                       "StatusFile": str(r.status_path), "Log": str(r.child.log_path)}
                              for r in self._rules if r.profiler},
        }
        try:
            layout.write_json(self.dir.job_json, {**to_json(self.job.describe()), "SdkExtLocal": local})
        except OSError as err:
            if not self._disk.note(err, self.dir.job_json):
                raise

    def _training_output(self, line: str) -> None:
        """Each line training prints: to the console (if any), and looked at for a full disk it reports."""
        self._disk.output_line(line, self.dir.training_log)
        if self.settings.output is not None:
            self.settings.output(line)

    def _on_disk_full(self, full: disk.DiskFullError) -> None:
        """The job's disk is full (disk.py): the supervisor ends the job Failed at its next turn."""
        logger.error("job %s: %s; ending the job", self.name, full.strerror)
        self._wake.set()

    def _end_marker(self) -> None:
        try:
            layout.write_end_marker(self.trial_dir)
        except OSError as err:
            if not self._disk.note(err, self.trial_dir):
                raise

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
            self._end_profiling()
            self._end_marker()
            self._save()
            if self._disk.full is None:
                self._finish_rules()
        except BaseException as err:
            self._abort(err)
            raise
        finally:
            stop_all(self._children, self.settings.rule_stop_grace)
            self._disk.reserve.give_back()  # every process has ended: the job's last words fit now
            if not self._profiling_ended:
                self._end_profiling()
            if self._disk.full is not None:
                self._end_rules(f"the local job failed: {self._disk.full.failure_reason}")
                self._end_marker()
            self._refresh_rules(final=True)
            self._save()
            self.dispatcher.close()
            self.job.mark_done()
        return self.job.describe()

    def _spawn(self, name: str, argv: list[str], env: dict[str, str], cwd: Path, log: Path,
               sink: Callable[[str], None] | None, death_signal: int) -> Child:
        child = Child(name, argv, env=env, cwd=cwd, log_path=log, sink=sink, parent_death_signal=death_signal,
                      death_grace=self.settings.stop_grace)
        self._children.append(child)
        child.start()
        return child

    def _start_rules(self) -> None:
        for rule in self.request.get("DebugRuleConfigurations") or []:
            self._start_rule(rule, profiler=False)
        for rule in self.request.get("ProfilerRuleConfigurations") or []:
            if rule_jobs.not_evaluated_locally(rule) is None:
                self._start_rule(rule, profiler=True)
        self._save()

    def _start_pending_rules(self) -> None:
        """Start the profiler rules UpdateTrainingJob added (on the supervisor's thread)."""
        while self._pending_profiler_rules:
            self._start_rule(self._pending_profiler_rules.pop(0), profiler=True)
            self._save()

    def _start_rule(self, rule: Mapping[str, Any], *, profiler: bool) -> None:
        """One evaluator process: over the trial for a DebugRuleConfiguration, over the profiler output
        (``--profiler``) for a ProfilerRuleConfiguration; its output in ``rules/<name>`` (a profiler rule
        named like a Debugger rule: ``rules/<name>-profiler``)."""
        env = rule_jobs.evaluator_env(os.environ, deployment.child_pythonpath(os.environ.get("PYTHONPATH")))
        name = rule["RuleConfigurationName"]
        if self._evaluator is None:  # a job that had no rules until UpdateTrainingJob added one
            try:
                self._evaluator = deployment.evaluator_command(self.settings.rules_dir)
            except ConfigError as err:
                self.job.update_rule(name, status="Error", details=f"InternalError: {err}", profiler=profiler)
                return
        debug_names = {r["RuleConfigurationName"] for r in self.request.get("DebugRuleConfigurations") or []}
        out = self.dir.rule_dir(f"{name}-profiler" if profiler and name in debug_names else name)
        out.mkdir(parents=True, exist_ok=True)
        trial: str | Path = self.trial_dir
        if profiler:
            trial = layout.profiler_dir(self.dir, self.request.get("ProfilerConfig") or {})
        argv = rule_jobs.evaluator_argv(
            python=self.settings.python, evaluator=self._evaluator, trial_dir=trial,
            output_dir=out, rule_configuration_name=name,
            rule_parameters=rule_jobs.describe_rule_parameters(rule),
            poll_interval=self.settings.rule_poll_interval, extra=["--profiler"] if profiler else [])
        try:
            child = self._spawn(f"rule {name}", argv, env, out, out / "evaluator.log", None, signal.SIGKILL)
        except OSError as err:
            self.job.update_rule(name, status="Error", details=f"InternalError: {err}", profiler=profiler)
            return
        self._rules.append(rule_jobs.RuleProcess(name, child, out, profiler=profiler))

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
        self._sync_monitor()  # sampling starts before training does
        group = self._group = self._training_group(command, env)
        combined = launcher.CombinedLog(self.dir.training_log, self._training_output) if len(group.specs) > 1 \
            else None
        try:
            group.start(lambda spec: self._spawn(
                f"training {spec.name}" if combined else "training", spec.argv, spec.env, command.cwd,
                spec.log_path, combined.sink(spec.prefix) if combined else self._training_output, signal.SIGTERM))
        except OSError as err:
            group.terminate()
            self.job.training_ended(failure_reason=f"AlgorithmError: {err}")
            return
        finally:
            self._training = group.children[0] if group.children else None
        try:
            self._supervise_training(command, group)
        finally:
            if combined is not None:
                combined.close()

    def _training_group(self, command: Command, env: dict[str, str]) -> launcher.TrainingGroup:
        """Every training process of every host (launcher.py), each with its host's environment."""
        assert self.launch is not None
        port = hosts.free_port()
        extra = launcher.v3_env(self._v3) if self._v3 is not None else {}

        def host_env(host: hosts.EmulatedHost) -> dict[str, str]:
            out = {**env, **hosts.host_env(host, master_port=port), **extra}
            out["SM_TRAINING_ENV"] = hosts.training_env_update(env.get("SM_TRAINING_ENV", "{}"), host,
                                                               master_port=port)
            out.update({str(k): str(v) for k, v in (self.request.get("Environment") or {}).items()})
            return out

        return launcher.TrainingGroup(launcher.process_specs(
            self.launch, self.hosts, command.argv, host_env=host_env, run_id=self.name, master_port=port,
            single_log=self.dir.training_log))

    def _supervise_training(self, command: Command, group: launcher.TrainingGroup) -> None:
        assert self._training is not None
        self.job.training_started()
        self._save()
        max_runtime = (self.request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
        started = time.monotonic()
        while (code := group.poll()) is None:
            self._wake.wait(self.settings.poll_interval)
            self._wake.clear()
            self._refresh_rules()
            self._sync_monitor()
            self._start_pending_rules()
            if max_runtime and time.monotonic() - started > float(max_runtime) and not self.job.stop_requested:
                try:
                    self.job.request_stop(secondary="MaxRuntimeExceeded")
                except JobStateError:
                    pass
            self._disk.check(self._training.output_error, self._training.log_path)
            if group.first_failure is not None and not group.stopping:
                logger.warning("job %s: %s ended with exit code %s; stopping every other process", self.name,
                               group.first_failure[0].describe(), group.first_failure[2])
                self._save()
            if self.job.stop_requested or self._disk.full is not None or group.first_failure is not None:
                group.terminate()
                group.escalate(self.settings.stop_grace)
        self._disk.check(self._training.output_error, self._training.log_path, now=True)
        self._save()  # a write before the outcome is decided: a full disk fails the job
        reason: str | None
        if self.job.stop_requested:
            reason = None
        elif self._disk.full is not None:
            reason = self._disk.full.failure_reason
        else:
            reason = None if code == 0 else self._failure_reason(code, command, group)
        self.job.training_ended(failure_reason=reason)

    def _failure_reason(self, code: int, command: Command, group: launcher.TrainingGroup) -> str:
        """SageMaker's FailureReason; with several processes, that of the one that failed first, naming it,
        with its log's last lines."""
        assert self._training is not None
        if len(group.specs) == 1:
            return failure_reason(code, command, self.dir, self._training.output_tail())
        spec, child, code = group.first_failure or (group.specs[0], self._training, code)
        tail = child.output_tail()
        own = failure_reason(code, Command(spec.argv, command.cwd, command.entry_point, command.user_args),
                             self.dir, tail)
        head, _, rest = own.partition("\n")
        others = " (every other process was stopped)" if len(group.specs) > 1 else ""
        return (f"{head}\n{spec.describe()} failed first{others}\n{rest}\n"
                f"Last lines of {spec.log_path.relative_to(self.dir.root)}:\n"
                f"{launcher.log_tail(tail, lines=8, limit=500)}")

    def _end_rules(self, why: str) -> None:
        """The job failed under the rules (their processes have ended): a rule without a verdict of its own
        is Stopped, saying why (also one that says it was stopped by the signal the runner sent it)."""
        for r in self._rules:
            r.read_if_changed()
            if r.last is not None and r.last.status in TERMINAL_RULE_STATUSES and r.last.status != "Stopped":
                continue  # its own verdict stands (_refresh_rules applies it)
            self.job.update_rule(r.name, status="Stopped", details=f"Rule evaluation stopped: {why}")

    # --- profiling ---------------------------------------------------------------------------------

    def _sync_monitor(self) -> None:
        """Start the system monitor when profiling is (or became) on; a running one follows
        profilerconfig.json by itself (interval, disabling)."""
        if not self._profiling_changed:
            return
        self._profiling_changed = False
        self._save()  # job.json shows an UpdateTrainingJob at once
        config = self.request.get("ProfilerConfig")
        if config is None or profiling_status(config) == "Disabled":
            return
        if self._monitor is not None:
            code = self._monitor.poll()
            if code is None:
                return
            logger.warning("job %s: the system monitor ended (exit code %s) and is started again: %s", self.name,
                           code, self._monitor.output_tail(400).strip().splitlines()[-1:])
        base = dict(os.environ)
        base["PYTHONPATH"] = deployment.child_pythonpath(os.environ.get("PYTHONPATH"))
        argv = [self.settings.python, "-m", "sdk_ext.profiler.monitor", "--out",
                str(layout.profiler_dir(self.dir, config)), "--host", layout.HOST, "--config",
                str(self.dir.profiler_config), "--period", repr(float(self.settings.profiler_file_seconds))]
        try:
            self._monitor = self._spawn("profiler monitor", argv, base, self.dir.root,
                                        self.dir.root / "logs" / "profiler-monitor.log", None, signal.SIGTERM)
        except OSError as err:
            logger.warning("job %s: the system monitor could not start (%s); no system metrics", self.name, err)

    def _end_profiling(self) -> None:
        """Training ended: stop the monitor (it publishes its file), publish what killed writers left,
        and mark the end in system/ and framework/ as SageMaker does."""
        self._profiling_ended = True
        waiting = any(r.profiler for r in self._rules)  # profiler rules end at the markers, data or not
        config = self.request.get("ProfilerConfig")
        if config is None and not waiting:
            return
        config = config or {}
        if self._monitor is not None and self._monitor.stop(self.settings.rule_stop_grace) not in (0, None):
            logger.warning("job %s: the system monitor failed; see %s", self.name, self._monitor.log_path)
        out = layout.profiler_dir(self.dir, config)
        if not out.is_dir() and not waiting:
            return  # profiling was never on, and no profiler rule waits for its end
        from sdk_ext.profiler import system_files, timeline

        try:
            system_files.recover(out)
            timeline.recover(out)
            system_files.write_end_marker(out)
        except OSError as err:
            logger.warning("job %s: the profiler output in %s could not be finished: %s", self.name, out, err)

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
            current = (self.job.profiler_rules() if r.profiler else self.job.rules())[r.name]
            if current.status in ("NoIssuesFound", "IssuesFound", "Error", "Stopped"):
                continue
            seen = r.final_status(code) if code is not None else r.read_if_changed()
            if seen is None:
                continue
            details = seen.details
            if seen.status == "Error" and details and "No debugging data" in details:
                details = f"{details.rstrip()} Why: {self._no_data_reason()}"
            changed |= self.job.update_rule(r.name, status=seen.status, details=details, step=seen.step,
                                            modified=seen.modified, profiler=r.profiler)
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
        self._disk.reserve.give_back()
        self._end_marker()
