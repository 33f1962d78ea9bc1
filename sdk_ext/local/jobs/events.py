"""EventBridge "SageMaker Training Job State Change" events for local jobs, and their delivery.

Every change of a local job (its status, secondary status or a rule's evaluation status) becomes one
event shaped like SageMaker's (README.md#auto-stop-stop-a-training-job-when-a-debugger-rule-finds-an-issue)::

    {"version": "0", "id": "<uuid4>", "detail-type": "SageMaker Training Job State Change",
     "source": "aws.sagemaker", "account": "000000000000", "time": "2026-11-20T12:26:13Z",
     "region": "local", "resources": ["<job arn>"],
     "detail": {<DescribeTrainingJob response, timestamps as epoch milliseconds>}}

:class:`EventDispatcher` delivers them in order, on its own thread, to targets (callables taking the
event). The auto-stop target hands each event to lambda/auto_stop.py's ``process_event`` with the
local client, the way EventBridge invokes the Lambda function. A target that raises is logged
(as a failed Lambda invocation would be) and delivery goes on.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DETAIL_TYPE = "SageMaker Training Job State Change"
SOURCE = "aws.sagemaker"

Target = Callable[[dict[str, Any]], object]


def _epoch_ms(value: datetime) -> int:
    return round(value.timestamp() * 1000)


def _with_epoch_ms(value: Any) -> Any:
    if isinstance(value, datetime):
        return _epoch_ms(value)
    if isinstance(value, Mapping):
        return {k: _with_epoch_ms(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_epoch_ms(v) for v in value]
    return value


def state_change_event(describe: Mapping[str, Any], *, region: str, account: str,
                       event_id: str | None = None, time: datetime | None = None) -> dict[str, Any]:
    """The state-change event for a DescribeTrainingJob response."""
    detail = _with_epoch_ms({k: v for k, v in describe.items() if k != "ModelArtifacts"})
    when = time or describe.get("LastModifiedTime") or datetime.now(timezone.utc)
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": DETAIL_TYPE,
        "source": SOURCE,
        "account": account,
        "time": when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [describe["TrainingJobArn"]],
        "detail": detail,
    }


def to_json(value: Any) -> Any:
    """A JSON-ready copy: datetimes as ISO 8601 strings."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    return value


class EventDispatcher:
    """Delivers events to targets in order, on one thread; optionally logs each with its results.

    Args:
        targets: called with each event, in order.
        log_path: each event and what each target returned are appended here as one JSON line.
    """

    _STOP = object()

    def __init__(self, targets: list[Target], *, log_path: Path | None = None) -> None:
        self.targets = list(targets)
        self.log_path = log_path
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        self._unlogged: list[str] = []  # lines not in the log yet (only the delivery thread touches it)
        self._log_failing = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="local event delivery", daemon=True)
        self._thread.start()

    def put(self, event: dict[str, Any]) -> None:
        """Queue an event (never blocks: called with the job's lock held)."""
        self._queue.put(event)

    def close(self, timeout: float = 30.0) -> None:
        """Deliver what is queued, then end the thread (waits up to ``timeout`` seconds)."""
        if self._thread is None:
            return
        self._queue.put(self._STOP)
        self._thread.join(timeout)
        if self._thread.is_alive():
            logger.warning("event delivery still busy after %.0f s; leaving it", timeout)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is self._STOP:
                self._flush_log()  # a last try (the runner freed its reserve before closing)
                return
            results = []
            for target in self.targets:
                try:
                    results.append({"target": _name(target), "result": target(event)})
                except Exception as err:
                    logger.exception("event target %s failed on event %s", _name(target), event.get("id"))
                    results.append({"target": _name(target), "error": f"{type(err).__name__}: {err}"})
            self.delivered += 1
            if self.log_path is not None:
                self._log(event, results)

    def _log(self, event: dict[str, Any], results: list[dict[str, Any]]) -> None:
        self._unlogged.append(json.dumps({"event": event, "results": to_json(results)}, default=str) + "\n")
        self._flush_log()

    def _flush_log(self) -> None:
        """Append the lines not logged yet, whole or not at all; kept for the next try if that fails (a
        full disk): the log never holds half a line, and loses no event that a later try can write."""
        if not self._unlogged or self.log_path is None:
            return
        try:
            append_whole(self.log_path, "".join(self._unlogged).encode("utf-8"))
        except OSError as err:
            if not self._log_failing:
                logger.warning("cannot log events to %s (%s); they are kept and written when it can be",
                               self.log_path, err)
            self._log_failing = True
            return
        self._unlogged.clear()
        self._log_failing = False


def append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` all at once; on a failure cut the file back to its size before."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        before = os.fstat(fd).st_size
        try:
            done = 0
            while done < len(data):
                done += os.write(fd, data[done:])
        except OSError:
            os.ftruncate(fd, before)
            raise
    finally:
        os.close(fd)


def _name(target: Target) -> str:
    return getattr(target, "name", None) or getattr(target, "__name__", None) or type(target).__name__


class AutoStopTarget:
    """Invokes lambda/auto_stop.py's ``process_event`` with a local SageMaker client, like EventBridge
    invokes the deployed function. Returns its result (the decision it logged).

    Args:
        client: ``describe_training_job``/``stop_training_job`` (sdk_ext.local's client).
        config: an ``auto_stop_policy.AutoStopConfig``; None: any Debugger rule may stop any job.
        module: the imported ``auto_stop`` module (default: loaded from the checkout's lambda/).
    """

    name = "auto_stop"

    def __init__(self, client: Any, *, config: Any = None, module: Any = None) -> None:
        if module is None:
            from sdk_ext.local.jobs.deployment import load_auto_stop

            module = load_auto_stop()
        self.module = module
        self.client = client
        self.config = config

    def __call__(self, event: dict[str, Any]) -> object:
        result: object = self.module.process_event(event, sagemaker=self.client, config=self.config)
        return result
