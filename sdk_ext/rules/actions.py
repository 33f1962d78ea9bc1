"""Rule actions (``action_json``): stop the training job, or send an SMS / e-mail through SNS.

The SDK sends them as the RuleParameter ``action_json``: one JSON object or a list of them::

    [{"name": "StopTraining", "training_job_prefix": "my-job"},
     {"name": "Email", "endpoint": "me@example.com"}, {"name": "SMS", "endpoint": "+15555550100"}]

Key names and action names are matched case-insensitively (smdebug lower-cases the whole string,
which also lower-cased the prefix and the e-mail address; here values keep their case). The SDK
escapes the quotes (``{\\"name\\": ...}``) because SageMaker's container builds Python source from
it; that escaping is undone. An action that cannot be understood is logged and skipped; a failing
AWS call is logged, never raised: the finding itself is already reported.

StopTraining calls ``ListTrainingJobs`` (NameContains=prefix, StatusEquals=InProgress) and stops the
job only if **exactly one** InProgress job name starts with the prefix, as SageMaker's does. The
AWS calls happen when the action runs, not when it is parsed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sdk_ext.exceptions import ConfigError

logger = logging.getLogger(__name__)

#: Makes a boto3 client for a service name ("sagemaker", "sns"); tests pass their own.
ClientFactory = Callable[[str], Any]
_MAX_LIST_PAGES = 50
SNS_TOPIC = "SMDebugRules"


@dataclass(frozen=True, slots=True)
class StopTraining:
    training_job_prefix: str


@dataclass(frozen=True, slots=True)
class Notify:
    protocol: str  # "sms" or "email"
    endpoint: str


Action = StopTraining | Notify


def _unescape(text: str) -> str:
    text = text.strip()
    if '\\"' in text:
        text = text.replace('\\"', '"')
    return text


def parse_actions(action_str: str | None) -> list[Action]:
    """The actions in ``action_str`` (empty for None / ``""``).

    Raises:
        ConfigError: ``action_str`` is not JSON, or not an object / list of objects.
    """
    text = _unescape(action_str or "")
    if not text:
        return []
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise ConfigError(
            f"action_json={action_str!r} is not valid JSON ({err}); expected e.g. "
            '\'{"name": "stoptraining", "training_job_prefix": "my-job"}\'',
            where="rule actions",
        ) from err
    items = [doc] if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise ConfigError(f"action_json={action_str!r} must be a JSON object or a list of objects",
                          where="rule actions")
    actions: list[Action] = []
    for item in items:
        if not isinstance(item, dict):
            logger.warning("skipping action %r: not a JSON object", item)
            continue
        fields = {str(k).lower(): v for k, v in item.items()}
        name = str(fields.get("name", "")).lower()
        if name == "stoptraining":
            prefix = fields.get("training_job_prefix")
            if not isinstance(prefix, str) or not prefix:
                logger.warning("skipping StopTraining action: it needs a training_job_prefix (%r)", item)
                continue
            actions.append(StopTraining(prefix))
        elif name in ("sms", "email"):
            endpoint = fields.get("endpoint")
            if not isinstance(endpoint, str) or not endpoint:
                logger.warning("skipping %s action: it needs an endpoint (%r)", name, item)
                continue
            actions.append(Notify(name, endpoint))
        else:
            logger.warning("skipping action %r: name must be StopTraining, SMS or Email", item)
    return actions


def _default_client(service: str) -> Any:
    import boto3  # only when an action actually runs

    return boto3.client(service, region_name=os.environ.get("AWS_REGION", "us-east-1"))


class Actions:
    """The actions of one rule. ``invoke`` runs them all and never raises."""

    def __init__(self, action_str: str | None, rule_name: str, *, client_factory: ClientFactory | None = None):
        self.rule_name = rule_name
        self.actions = parse_actions(action_str)
        self._client_factory = client_factory or _default_client

    def __bool__(self) -> bool:
        return bool(self.actions)

    def invoke(self, message: str = "") -> None:
        for action in self.actions:
            try:
                if isinstance(action, StopTraining):
                    self._stop_training(action.training_job_prefix)
                else:
                    self._notify(action, message)
            except Exception:
                logger.exception("rule %s: action %r failed", self.rule_name, action)

    def _stop_training(self, prefix: str) -> None:
        client = self._client_factory("sagemaker")
        matches: list[str] = []
        kwargs: dict[str, Any] = {"NameContains": prefix, "StatusEquals": "InProgress",
                                  "SortBy": "CreationTime", "SortOrder": "Descending"}
        for _ in range(_MAX_LIST_PAGES):
            page = client.list_training_jobs(**kwargs)
            matches += [j["TrainingJobName"] for j in page.get("TrainingJobSummaries", [])
                        if j["TrainingJobName"].startswith(prefix)]
            if matches or not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
        if len(matches) != 1:
            logger.warning("rule %s: StopTraining skipped: %d InProgress jobs start with %r (need exactly 1): %s",
                           self.rule_name, len(matches), prefix, matches)
            return
        logger.info("rule %s: stopping training job %s", self.rule_name, matches[0])
        client.stop_training_job(TrainingJobName=matches[0])

    def _notify(self, action: Notify, message: str) -> None:
        client = self._client_factory("sns")
        topic = client.create_topic(Name=SNS_TOPIC)["TopicArn"]
        key = "phone_num" if action.protocol == "sms" else "email"
        subscribed = any(
            s.get("Endpoint") == action.endpoint
            for s in client.list_subscriptions_by_topic(TopicArn=topic).get("Subscriptions", [])
        )
        if not subscribed:
            client.subscribe(TopicArn=topic, Protocol=action.protocol, Endpoint=action.endpoint,
                             Attributes={"FilterPolicy": json.dumps({key: [action.endpoint]})})
        client.publish(
            TopicArn=topic,
            Subject=f"SMDebugRule:{self.rule_name} fired",
            Message=f"SMDebugRule:{self.rule_name} fired. {message}",
            MessageAttributes={key: {"DataType": "String", "StringValue": action.endpoint}},
        )


__all__ = ["Action", "Actions", "ClientFactory", "Notify", "StopTraining", "parse_actions"]
