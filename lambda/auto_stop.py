"""Stop a SageMaker training job when one of its Debugger rules reports ``IssuesFound``.

Deployed as a plain Lambda asset (Python 3.13 runtime, needs only boto3) with auto_stop_policy.py beside
it. EventBridge delivers the "SageMaker Training Job State Change" event; the rule in infra/ already keeps
only ``IssuesFound`` on ``InProgress`` jobs, and this function decides again on its own, so a wider rule,
a replayed event or a local loop that sends every state change is still safe.

A job is stopped only when (1) its name starts with the configured prefix, (2) the event shows an allowed
rule with ``IssuesFound``, (3) the event says the job is ``InProgress``, (4) ``DescribeTrainingJob`` says
it still is (events repeat and arrive late; our own stop causes more of them) and (5) shows that same rule
with ``IssuesFound`` (whoever may invoke the function can send any event; only SageMaker's own answer
counts), and (6) with an opt-in tag configured, ``ListTags`` shows the job tagged ``<key>=true``. Stopping
a job that is already stopping or stopped is success; a ``ValidationException`` means that only with
SageMaker's exact messages for it. Throttling is retried with backoff, then raised so Lambda retries the
event and finally parks it in the dead-letter queue. A malformed event raises ``BadEventError`` naming the
field and stops nothing. Once the job is stopped, nothing fails the invocation: a failed notification is
logged, never raised (a retry would not stop again, and would not notify either). Every invocation logs
one JSON line: job, rules, action, reason.

Entry points:
    ``handler(event, context)``: the Lambda entry. Configuration from the environment (AUTO_STOP_*, see
    auto_stop_policy.py), boto3 clients cached for the life of the execution environment.
    ``process_event(event, *, sagemaker, sns=None, config=None, sleep=time.sleep)``: the same, with every
    dependency passed in; the tests and ``sdk_ext.local`` call this with their own clients.
"""

from __future__ import annotations

import enum
import functools
import json
import logging
import random
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import boto3
from auto_stop_policy import (
    IN_PROGRESS,
    OPT_IN_VALUE,
    AutoStopConfig,
    BadEventError,
    ConfigError,
    Decision,
    RuleKind,
    RuleStatus,
    TrainingJobChange,
    confirm,
    decide,
    opted_in,
)
from botocore.config import Config as BotocoreConfig
from botocore.exceptions import ClientError

__all__ = [
    "Action",
    "AutoStopConfig",
    "BadEventError",
    "ConfigError",
    "Decision",
    "RuleKind",
    "RuleStatus",
    "SageMakerClient",
    "SnsClient",
    "TaggedSageMakerClient",
    "TrainingJobChange",
    "decide",
    "handler",
    "process_event",
]

logger = logging.getLogger(__name__)

_THROTTLING = frozenset(
    {"ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded",
     "RequestThrottled", "RequestThrottledException", "ThrottledException", "SlowDown"}
)  # fmt: skip
# SageMaker's exact answers (ValidationException) to stopping a job that is not running, and to naming a
# job that does not exist; any other ValidationException is a real error and is raised.
_NOT_RUNNING = re.compile(
    r"The request was rejected because the training job is in status "
    r"(Stopping|Stopped|Completed|Failed|Deleting)\."
)
_NOT_FOUND = "Requested resource not found."
_MAX_TAG_PAGES = 10  # a resource has at most 50 tags
T = TypeVar("T")


class SageMakerClient(Protocol):
    """The two SageMaker calls the function makes (a boto3 client, or sdk_ext.local's job backend)."""

    def describe_training_job(self, *, TrainingJobName: str) -> Mapping[str, Any]: ...
    def stop_training_job(self, *, TrainingJobName: str) -> object: ...


class TaggedSageMakerClient(SageMakerClient, Protocol):
    """With an opt-in tag configured, the function also reads the job's tags."""

    def list_tags(self, **kwargs: Any) -> Mapping[str, Any]: ...


class SnsClient(Protocol):
    def publish(self, *, TopicArn: str, Subject: str, Message: str) -> object: ...


class Action(str, enum.Enum):
    """What one invocation did: the ``action`` of its log line and result."""

    STOPPED = "stopped"  # StopTrainingJob succeeded
    DRY_RUN = "dry_run"  # would have stopped
    NOT_RUNNING = "not_running"  # already stopping, stopped, ended or gone: nothing to do
    IGNORED = "ignored"  # the event does not call for a stop (or the job has not opted in)
    UNCONFIRMED = "unconfirmed"  # DescribeTrainingJob does not show the event's rule with IssuesFound
    REJECTED = "rejected"  # malformed event; BadEventError raised
    FAILED = "failed"  # a SageMaker call failed; ClientError raised so Lambda retries


def process_event(
    event: Mapping[str, Any],
    *,
    sagemaker: SageMakerClient,
    sns: SnsClient | None = None,
    config: AutoStopConfig | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Decide on one state-change event and act on it: the handler with its dependencies passed in.

    Args:
        event: the EventBridge event, as Lambda passes it.
        sagemaker: ``describe_training_job(TrainingJobName=)`` returning at least ``TrainingJobStatus``
            and the rule statuses, ``stop_training_job(TrainingJobName=)``, and with ``config.opt_in_tag``
            ``list_tags(ResourceArn=)``. Errors are botocore ``ClientError``s as boto3 raises them:
            ValidationException "The request was rejected because the training job is in status
            Stopped." (or Stopping, Completed, Failed, Deleting) means not running; ResourceNotFound or
            ValidationException "Requested resource not found." means gone.
        sns: ``publish(TopicArn=, Subject=, Message=)``; used only when ``config.topic_arn`` is set.
        config: ``AutoStopConfig()`` when omitted (any rule, any job); the handler reads the environment.
        sleep: waits between throttled attempts.

    Returns:
        The decision, also logged as one JSON line: ``job``, ``rules`` (names), ``action`` (an ``Action``
        value), ``reason``, ``stopped`` (this call stopped the job), ``dry_run``, ``notified``, ``event_id``.

    Raises:
        BadEventError: malformed event; nothing was called.
        ClientError: throttled ``config.max_attempts`` times, or any other failure (access denied...);
            raising lets Lambda retry the event and then dead-letter it.
    """
    config = AutoStopConfig() if config is None else config
    event_id = event.get("id") if isinstance(event, Mapping) else None
    try:
        change = TrainingJobChange.from_event(event)
    except BadEventError as err:
        _log(logging.ERROR, None, (), Action.REJECTED, str(err), config, event_id)
        raise
    decision = decide(change, config)

    def outcome(
        action: Action, reason: str, *, notified: bool = False, level: int = logging.INFO
    ) -> dict[str, Any]:
        return _log(level, change.job_name, decision.rules, action, reason, config, change.event_id, notified)

    if not decision.stop:
        return outcome(Action.IGNORED, decision.reason)
    call = functools.partial(_with_backoff, config=config, sleep=sleep)
    try:
        job = call(sagemaker.describe_training_job, TrainingJobName=change.job_name)
    except ClientError as err:
        if _is_not_found(err):
            return outcome(Action.NOT_RUNNING, f"{decision.reason}; DescribeTrainingJob: {_message(err)}")
        outcome(
            Action.FAILED, f"DescribeTrainingJob failed: {_code(err)}: {_message(err)}", level=logging.ERROR
        )
        raise
    status = job.get("TrainingJobStatus")
    if status != IN_PROGRESS:
        return outcome(Action.NOT_RUNNING, f"{decision.reason}; DescribeTrainingJob says the job is {status}")
    confirmed, unconfirmed = confirm(decision, job)
    if not confirmed:
        return outcome(
            Action.UNCONFIRMED, f"the event says {decision.reason}; {unconfirmed}", level=logging.WARNING
        )
    decision = Decision(True, confirmed, f"{', '.join(r.name for r in confirmed)} reported IssuesFound")
    if config.opt_in_tag is not None:
        try:
            tagged = _opted_in(job, config.opt_in_tag, sagemaker, call)
        except ClientError as err:
            if _is_not_found(err):
                return outcome(Action.NOT_RUNNING, f"{decision.reason}; ListTags: {_message(err)}")
            outcome(Action.FAILED, f"ListTags failed: {_code(err)}: {_message(err)}", level=logging.ERROR)
            raise
        if not tagged:
            return outcome(
                Action.IGNORED,
                f"{decision.reason}; the job has not opted in (no tag {config.opt_in_tag}={OPT_IN_VALUE})",
            )
    if config.dry_run:
        action, reason = Action.DRY_RUN, f"dry run, would stop: {decision.reason}"
    else:
        try:
            call(sagemaker.stop_training_job, TrainingJobName=change.job_name)
        except ClientError as err:
            if not (_is_not_running(err) or _is_not_found(err)):
                outcome(
                    Action.FAILED,
                    f"StopTrainingJob failed: {_code(err)}: {_message(err)}",
                    level=logging.ERROR,
                )
                raise
            return outcome(Action.NOT_RUNNING, f"{decision.reason}; StopTrainingJob: {_message(err)}")
        action, reason = Action.STOPPED, f"stopped: {decision.reason}"
    return outcome(action, reason, notified=_notify(sns, change, decision, action, config, call))


def _opted_in(job: Mapping[str, Any], key: str, sagemaker: SageMakerClient, call: Callable[..., Any]) -> bool:
    """Whether ListTags shows the job tagged ``key=true`` (the IAM condition on StopTrainingJob agrees)."""
    arn = job.get("TrainingJobArn")
    list_tags = getattr(sagemaker, "list_tags", None)
    if not isinstance(arn, str) or list_tags is None:
        return False  # nothing to check the tag with: not opted in
    token: str | None = None
    for _ in range(_MAX_TAG_PAGES):
        page = call(list_tags, ResourceArn=arn, **({"NextToken": token} if token else {}))
        if opted_in(page.get("Tags"), key):
            return True
        token = page.get("NextToken")
        if not token:
            break
    return False


def _with_backoff(
    fn: Callable[..., T], /, *, config: AutoStopConfig, sleep: Callable[[float], None], **kwargs: Any
) -> T:
    """Call ``fn``; on throttling wait (exponential, jittered, capped) and retry; re-raise the last."""
    attempt = 1
    while True:
        try:
            return fn(**kwargs)
        except ClientError as err:
            if _code(err) not in _THROTTLING or attempt >= config.max_attempts:
                raise
            delay = min(config.max_delay, config.base_delay * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            logger.warning(
                "throttled (%s) on attempt %d of %d; retrying in %.2f s",
                _code(err),
                attempt,
                config.max_attempts,
                delay,
            )
            sleep(delay)
            attempt += 1


def _notify(
    sns: SnsClient | None,
    change: TrainingJobChange,
    decision: Decision,
    action: Action,
    config: AutoStopConfig,
    call: Callable[..., Any],
) -> bool:
    """Tell the topic. A failure is logged, not raised: the stop has happened, and a retried event
    would not notify anyway (the job is no longer InProgress)."""
    if config.topic_arn is None or sns is None:
        return False
    verb = "stopped" if action is Action.STOPPED else "would stop (dry run)"
    message = {
        "job": change.job_name,
        "action": action.value,
        "reason": decision.reason,
        "rules": [
            {
                "name": r.name,
                "kind": "profiler" if r.kind is RuleKind.PROFILER else "debugger",
                "status": r.status,
                "details": r.details,
            }
            for r in decision.rules
        ],
    }
    try:
        call(
            sns.publish,
            TopicArn=config.topic_arn,
            Subject=f"Debugger auto-stop {verb} {change.job_name}"[:100],
            Message=json.dumps(message, indent=2),
        )
    except Exception as err:  # ClientError, a connection error, anything: the stop has happened
        logger.error(
            "could not notify %s that %s was %s: %s: %s",
            config.topic_arn,
            change.job_name,
            action.value,
            type(err).__name__,
            err,
        )
        return False
    return True


def _log(
    level: int,
    job: str | None,
    rules: tuple[RuleStatus, ...],
    action: Action,
    reason: str,
    config: AutoStopConfig,
    event_id: object,
    notified: bool = False,
) -> dict[str, Any]:
    """The one JSON line per decision; ``extra`` also puts it into Lambda's JSON log record as a field."""
    record = {
        "job": job,
        "rules": [r.name for r in rules],
        "action": action.value,
        "reason": reason,
        "stopped": action is Action.STOPPED,
        "dry_run": config.dry_run,
        "notified": notified,
        "event_id": event_id if isinstance(event_id, str) else None,
    }
    logger.log(level, json.dumps(record, sort_keys=True), extra={"auto_stop": record})
    return record


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _message(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Message", ""))


def _is_not_running(err: ClientError) -> bool:
    return _code(err) == "ValidationException" and _NOT_RUNNING.fullmatch(_message(err).strip()) is not None


def _is_not_found(err: ClientError) -> bool:
    code = _code(err)
    return code == "ResourceNotFound" or (code == "ValidationException" and _message(err).strip() == _NOT_FOUND)


@functools.cache
def _client(service: str) -> Any:
    """One boto3 client per service for the life of the execution environment."""
    # botocore retries a transient error once; throttling gets the longer backoff of _with_backoff
    retries: Any = {"mode": "standard", "max_attempts": 2}
    return boto3.client(service, config=BotocoreConfig(retries=retries, connect_timeout=5, read_timeout=15))


def handler(event: Mapping[str, Any], context: object) -> dict[str, Any]:
    """Lambda entry point: ``process_event`` with the environment's configuration and boto3 clients.

    Raises:
        ConfigError: the AUTO_STOP_* environment is invalid (every invocation fails loudly until fixed).
    """
    config = AutoStopConfig.from_env()
    sns = _client("sns") if config.topic_arn else None
    return process_event(event, sagemaker=_client("sagemaker"), sns=sns, config=config)
