"""attach: turn Debugger on for every CreateTrainingJob a boto3 session or SageMaker client sends.

SageMaker SDK v3's ModelTrainer has no Debugger options, but it sends CreateTrainingJob through a
boto3 client like every other tool. ``attach`` registers a handler on botocore's
``before-parameter-build.sagemaker.CreateTrainingJob`` event; the handler replaces the request's
parameters with :func:`~sdk_ext.debugger.apply_debugger`'s result before botocore validates and
sends them, so a bad configuration fails the call before anything leaves the machine::

    session = boto3.Session(region_name="us-west-2")
    attach(session, rules=[Rule.sagemaker(rule_configs.loss_not_decreasing())])
    ModelTrainer(..., sagemaker_session=Session(boto_session=session)).train()

A client copies its session's handlers when it is created: attach to the session before the
clients you use are made, or attach to the client itself.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Union, final

from sdk_ext.debugger.apply import apply_debugger, check_apply_arguments
from sdk_ext.debugger.errors import DebuggerConfigError, Problems
from sdk_ext.debugger.hook_config import DebuggerHookConfig, TensorBoardOutputConfig
from sdk_ext.debugger.profiler import ProfilerConfig
from sdk_ext.debugger.rules import RuleBase
from sdk_ext.debugger.sources import RuleSourceUploader

logger = logging.getLogger(__name__)

EVENT = "before-parameter-build.sagemaker.CreateTrainingJob"

JobNameFilter = Union[str, "re.Pattern[str]", Callable[[str], bool], None]


def _emitters(target: Any) -> list[Any]:
    """The event emitters to register on, for a boto3/botocore session, a client or a SDK Session."""
    meta = getattr(target, "meta", None)
    if meta is not None and hasattr(meta, "events"):
        service = getattr(getattr(meta, "service_model", None), "service_name", None)
        if service != "sagemaker":
            raise DebuggerConfigError([f"attach needs a SageMaker client, got a {service!r} client"],
                                      where="attach")
        return [meta.events]
    if hasattr(target, "events") and hasattr(target, "client"):  # boto3.Session
        return [target.events]
    if hasattr(target, "get_component") and hasattr(target, "create_client"):  # botocore Session
        return [target.get_component("event_emitter")]
    boto_session = getattr(target, "boto_session", None)
    if boto_session is not None:  # a SageMaker SDK Session: its boto3 session and the client it made
        emitters = _emitters(boto_session)
        client = getattr(target, "sagemaker_client", None)
        if client is not None and hasattr(client, "meta"):
            emitters.append(client.meta.events)
        return emitters
    raise DebuggerConfigError([(f"cannot attach to {type(target).__name__}: give a boto3 Session, a botocore "
                                "Session, a SageMaker client or a SageMaker SDK Session")], where="attach")


def _name_matcher(job_name_filter: JobNameFilter) -> Callable[[str], bool]:
    if job_name_filter is None:
        return lambda name: True
    if isinstance(job_name_filter, str):
        job_name_filter = re.compile(job_name_filter)
    if isinstance(job_name_filter, re.Pattern):
        pattern = job_name_filter
        return lambda name: pattern.fullmatch(name) is not None
    if callable(job_name_filter):
        return job_name_filter
    raise DebuggerConfigError([(f"job_name_filter must be a regular expression or a function of the job name, "
                                f"got {job_name_filter!r}")], where="attach")


@final
class Attachment:
    """A registered handler; :meth:`detach` (or leaving a ``with`` block) removes it.

    ``applied`` lists the names of the jobs it configured, in order.
    """

    def __init__(self, emitters: list[Any], handler: Callable[..., None], unique_id: str) -> None:
        self._emitters = emitters
        self._handler = handler
        self._unique_id = unique_id
        self.applied: list[str] = []

    def detach(self) -> None:
        for emitter in self._emitters:
            emitter.unregister(EVENT, self._handler, unique_id=self._unique_id)
        self._emitters = []

    def __enter__(self) -> Attachment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()


def attach(
    target: Any,
    *,
    debugger_hook_config: DebuggerHookConfig | bool | None = None,
    rules: Sequence[RuleBase] | None = None,
    tensorboard_output_config: TensorBoardOutputConfig | None = None,
    profiler_config: ProfilerConfig | None = None,
    disable_profiler: bool | None = None,
    region: str | None = None,
    framework: str | None = None,
    framework_version: str | None = None,
    uploader: RuleSourceUploader | None = None,
    now: Callable[[], datetime] | None = None,
    job_name_filter: JobNameFilter = None,
) -> Attachment:
    """Apply :func:`apply_debugger` with these arguments to every CreateTrainingJob ``target`` sends.

    Args:
        target: A boto3 Session, botocore Session, SageMaker client, or SageMaker SDK Session.
        region: The jobs' region; by default the region of the client sending each request.
        job_name_filter: Only jobs whose name matches: a regular expression (matched against the
            whole name) or a function of the name. Others are sent unchanged.
        **others: As for :func:`apply_debugger`.

    Returns:
        The Attachment, to detach later.

    Raises:
        DebuggerConfigError: invalid arguments or target (found now, not at the first job).
    """
    problems = Problems("attach")
    check_apply_arguments(problems, debugger_hook_config=debugger_hook_config, rules=rules, region=region or "-",
                          tensorboard_output_config=tensorboard_output_config, profiler_config=profiler_config,
                          disable_profiler=disable_profiler, framework=framework,
                          framework_version=framework_version)
    problems.raise_if_any()
    matches = _name_matcher(job_name_filter)
    emitters = _emitters(target)
    rule_list = None if rules is None else list(rules)

    def handler(params: dict[str, Any], context: Any = None, **_: Any) -> None:
        name = params.get("TrainingJobName")
        if not isinstance(name, str) or not matches(name):
            logger.debug("job %s does not match the job name filter; sent without Debugger changes", name)
            return
        job_region: str = region or (context or {}).get("client_region") or ""
        configured = apply_debugger(params, debugger_hook_config=debugger_hook_config, rules=rule_list,
                                    tensorboard_output_config=tensorboard_output_config,
                                    profiler_config=profiler_config, disable_profiler=disable_profiler,
                                    region=job_region, framework=framework, framework_version=framework_version,
                                    uploader=uploader, now=now)
        # botocore builds the request from this very dict, so it is changed in place (the only place).
        params.clear()
        params.update(configured)
        attachment.applied.append(name)
        logger.info("job %s: SageMaker Debugger configured", name)

    unique_id = f"sdk_ext.debugger.attach-{uuid.uuid4()}"
    attachment = Attachment(emitters, handler, unique_id)
    for emitter in emitters:
        emitter.register(EVENT, handler, unique_id=unique_id)
    return attachment
