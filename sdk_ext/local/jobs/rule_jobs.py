"""Rule evaluations of a local job: one rule evaluator (``sdk_ext.evaluator``, the program of
``rules/evaluate.py``) process per DebugRuleConfiguration and per ProfilerRuleConfiguration.

SageMaker starts one Processing job per rule configuration; here each is a subprocess::

    python -m sdk_ext.evaluator --trial-dir <trial> --output-dir <job dir>/rules/<name>
        --rule-configuration-name <name> --poll-interval <s> --param <k>=<v> ...   (RuleParameters verbatim)

Its ``status.json`` (written atomically by the evaluator) is read whenever it changes; the exit code
decides when the file never reached a final status. Rule actions (``action_json``) are not run by
the evaluator locally (``SDK_EXT_RULE_ACTIONS=0``): StopTraining is what the auto-stop handler does,
and Email/SMS need AWS.

A profiler rule's evaluator reads the job's profiler output (``--trial-dir <profiler-output> --profiler``).
Its IssuesFound stops the job only where asked for, as the deployed auto-stop function lets profiler rules
stop jobs only when configured to: by a StopTraining action in the rule's ``action_json``
(:func:`auto_stop_config`) or by the local settings' ``AutoStopConfig``. DetailedProfilerProcessing
(SageMaker's post-processing of detailed profiles, no rule) is reported as not evaluated locally.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sdk_ext.local.jobs.processes import Child

logger = logging.getLogger(__name__)

STATUS_FILE = "status.json"
#: ProfilerRuleConfigurations a local job does not evaluate (``rule_to_invoke`` -> why).
NOT_EVALUATED_LOCALLY = {
    "DetailedProfilerProcessing": "DetailedProfilerProcessing is SageMaker's post-processing of detailed "
                                  "profiles, not a rule; a local job keeps the torch.profiler traces in "
                                  "profiler-output/framework/ instead",
}
EXIT_STATUS = {0: "NoIssuesFound", 2: "Error", 3: "IssuesFound", 4: "Stopped"}
_STEP_IN_DETAILS = re.compile(r"\bat step (\d+)\b")


def processing_job_name(job_name: str, rule_name: str) -> str:
    """SageMaker's rule job name: ``{job[:26]}-{rule[:26]}-{8 hex}`` (lowercase; hex from both names)."""
    digest = hashlib.sha1(f"{job_name}/{rule_name}".encode()).hexdigest()[:8]
    return f"{job_name[:26]}-{rule_name[:26]}-{digest}".lower()


def evaluator_argv(
    *,
    python: str,
    evaluator: Sequence[str],
    trial_dir: str | os.PathLike[str],
    output_dir: Path,
    rule_configuration_name: str,
    rule_parameters: Mapping[str, str],
    poll_interval: float,
    extra: Sequence[str] = (),
) -> list[str]:
    """The evaluator's command line for one rule configuration (its RuleParameters passed verbatim).

    ``evaluator`` follows the interpreter: ``deployment.evaluator_command()``. ``trial_dir`` is passed as
    given: an ``s3://`` URI must not go through ``Path`` (which collapses ``//``).
    """
    argv = [python, *evaluator, "--trial-dir", os.fspath(trial_dir), "--output-dir", str(output_dir),
            "--rule-configuration-name", rule_configuration_name, "--poll-interval", repr(float(poll_interval))]
    for key, value in rule_parameters.items():
        argv += ["--param", f"{key}={value}"]
    return [*argv, *extra]


def evaluator_env(base: Mapping[str, str], pythonpath: str) -> dict[str, str]:
    env = dict(base)
    env["PYTHONPATH"] = pythonpath
    env["SDK_EXT_RULE_ACTIONS"] = "0"
    env["PYTHONUNBUFFERED"] = "1"
    for key in ("TRAINING_JOB_NAME", "SMDEBUG_CONFIG_FILE_PATH"):  # a rule is not a training process
        env.pop(key, None)
    return env


@dataclass(frozen=True, slots=True)
class StatusFile:
    """What one read of ``status.json`` said."""

    status: str
    details: str | None
    step: int | None
    modified: datetime | None


def step_from_details(details: str | None) -> int | None:
    """The step in SageMaker's ``... Evaluation of the rule X at step 500 resulted in ...`` message."""
    match = _STEP_IN_DETAILS.search(details or "")
    return int(match.group(1)) if match else None


def read_status_file(path: Path) -> StatusFile | None:
    """Parse a status.json; None if it is missing or not (yet) valid."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("RuleEvaluationStatus"), str):
        return None
    modified = None
    raw = doc.get("LastModifiedTime")
    if isinstance(raw, str):
        try:
            modified = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            modified = None
    step = doc.get("Step")
    details = doc.get("StatusDetails")
    details = details if isinstance(details, str) and details else None
    if not isinstance(step, int) or isinstance(step, bool):
        step = step_from_details(details) if doc["RuleEvaluationStatus"] == "IssuesFound" else None
    return StatusFile(doc["RuleEvaluationStatus"], details, step, modified)


def not_evaluated_locally(rule: Mapping[str, Any]) -> str | None:
    """Why a ProfilerRuleConfiguration is not evaluated by a local job, or None when it is."""
    invoke = str((rule.get("RuleParameters") or {}).get("rule_to_invoke", "")).strip()
    return NOT_EVALUATED_LOCALLY.get(invoke)


def asks_to_stop(rule: Mapping[str, Any]) -> bool:
    """Whether a rule configuration's ``action_json`` holds a StopTraining action."""
    action = str((rule.get("RuleParameters") or {}).get("action_json", ""))
    return "stoptraining" in action.replace("\\", "").replace(" ", "").lower()


def auto_stop_config(module: Any, request: Mapping[str, Any], *, profiler_rules_stop: bool = False) -> Any:
    """The auto-stop function's configuration for a local job, or None for its default (any Debugger rule
    stops the job, profiler rules do not).

    With ``profiler_rules_stop`` every profiler rule may stop the job too; otherwise the profiler rules whose
    ``action_json`` asks for StopTraining may (with every Debugger rule, as by default).
    """
    profiler = request.get("ProfilerRuleConfigurations") or []
    if profiler_rules_stop:
        return module.AutoStopConfig(profiler_rules_can_stop=True)
    asking = [r["RuleConfigurationName"] for r in profiler if asks_to_stop(r)]
    if not asking:
        return None
    debug = [r["RuleConfigurationName"] for r in request.get("DebugRuleConfigurations") or []]
    return module.AutoStopConfig(profiler_rules_can_stop=True, rule_names=frozenset([*debug, *asking]))


class RuleProcess:
    """One rule evaluation: its process and the status file it writes (``profiler``: a profiler rule's)."""

    def __init__(self, name: str, child: Child, output_dir: Path, *, profiler: bool = False) -> None:
        self.name = name
        self.profiler = profiler
        self.child = child
        self.output_dir = output_dir
        self._seen: tuple[int, int] | None = None
        self.last: StatusFile | None = None
        self.timed_out = False

    @property
    def status_path(self) -> Path:
        return self.output_dir / STATUS_FILE

    def read_if_changed(self) -> StatusFile | None:
        """The status file, if it changed since the last call (cheap: one stat)."""
        try:
            st = os.stat(self.status_path)
        except OSError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        if key == self._seen:
            return None
        status = read_status_file(self.status_path)
        if status is not None:
            self._seen = key
            self.last = status
        return status

    def final_status(self, exit_code: int) -> StatusFile:
        """The outcome once the process ended: its status file, or what its exit code says."""
        self.read_if_changed()
        last = self.last
        if last is not None and last.status not in ("InProgress", "Stopping"):
            return last
        if self.timed_out:
            return StatusFile("Stopped", "Rule evaluation stopped: it was still running when the local job's "
                              "time for rules after training ran out", None, None)
        if self.child.terminated_at is not None:
            return StatusFile("Stopped", "Rule evaluation stopped with the local job", None, None)
        tail = self.child.output_tail(700).strip()
        how = f"was killed by signal {-exit_code}" if exit_code < 0 else f"exited with code {exit_code}"
        status = EXIT_STATUS.get(exit_code, "Error") if exit_code in (0, 3) else "Error"
        details = f"InternalError: the rule evaluator {how} without a final status"
        return StatusFile(status, f"{details}; its log ends with: {tail}" if tail else details, None, None)


def describe_rule_parameters(rule: Mapping[str, Any]) -> dict[str, str]:
    """A DebugRuleConfiguration's RuleParameters as strings (as SageMaker passes them)."""
    params = rule.get("RuleParameters") or {}
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
