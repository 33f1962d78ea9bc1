"""The EventBridge pattern, taken from the synthesized templates, over events that must and must not match.

Also: the pattern is an exact pre-filter for the handler's own decision (same events in, same answer),
and the test matcher itself behaves like EventBridge on the documented cases.
"""

from __future__ import annotations

from typing import Any

import pytest
from auto_stop_policy import AutoStopConfig, TrainingJobChange, decide

from tests.infra.conftest import SCOPED
from tests.infra.eventpattern import UnsupportedPatternError, matches
from tests.sagemaker_events import captured_event, event_with, no_issues_event, profiler_only_event


def _pattern(synthesized, name: str) -> dict[str, Any]:
    (rule,) = synthesized.templates[name].find_resources("AWS::Events::Rule").values()
    pattern: dict[str, Any] = rule["Properties"]["EventPattern"]
    return pattern


def _without_debugger(event: dict[str, Any]) -> dict[str, Any]:
    for key in ("DebugHookConfig", "DebugRuleConfigurations", "DebugRuleEvaluationStatuses"):
        event["detail"].pop(key)
    return event


def _other_type(event: dict[str, Any]) -> dict[str, Any]:
    event["detail-type"] = "SageMaker Processing Job State Change"
    return event


def _other_source(event: dict[str, Any]) -> dict[str, Any]:
    event["source"] = "custom.sagemaker"
    return event


# (id, event, matches the default pattern, matches the scoped pattern)
CASES = [
    ("captured", captured_event(), True, True),
    ("two-rules-issues", event_with(debug={"LossNotDecreasing": "IssuesFound"}), True, True),
    ("no-issues", no_issues_event(), False, False),
    ("rule-error", event_with(debug={"VanishingGradient": "Error"}), False, False),
    ("job-stopping", event_with(job_status="Stopping"), False, False),
    ("job-stopped", event_with(job_status="Stopped"), False, False),
    ("job-completed", event_with(job_status="Completed"), False, False),
    ("job-failed", event_with(job_status="Failed"), False, False),
    ("no-debugger", _without_debugger(captured_event()), False, False),
    ("profiler-report-only", profiler_only_event(), False, False),
    (
        "profiler-allowed-rule",
        event_with(debug={"VanishingGradient": "InProgress"}, profiler={"LowGPUUtilization": "IssuesFound"}),
        False,
        True,
    ),
    (
        "other-rule-only",
        event_with(debug={"VanishingGradient": "InProgress", "LossNotDecreasing": "IssuesFound"}),
        True,
        False,
    ),  # the allowed rule is not the one that found issues
    ("other-prefix", event_with(job_name="resnet-2026-11-20-12-00-00-000"), True, False),
    ("other-detail-type", _other_type(captured_event()), False, False),
    ("other-source", _other_source(captured_event()), False, False),
]
IDS = [case[0] for case in CASES]
SCOPED_CONFIG = AutoStopConfig(
    job_name_prefix=SCOPED["job_name_prefix"],
    rule_names=frozenset(SCOPED["rule_names"]),
    profiler_rules_can_stop=SCOPED["profiler_rules_can_stop"],
)


@pytest.mark.parametrize(("case", "event", "default", "scoped"), CASES, ids=IDS)
def test_synthesized_patterns_match_exactly_the_events_that_should_stop_a_job(
    synthesized, case, event, default, scoped
):
    assert matches(_pattern(synthesized, "default"), event) is default
    assert matches(_pattern(synthesized, "scoped"), event) is scoped


@pytest.mark.parametrize(("case", "event", "default", "scoped"), CASES, ids=IDS)
def test_pattern_and_handler_agree(synthesized, case, event, default, scoped):
    """Wherever the pattern lets an event through, the handler would stop (and nowhere else)."""
    if event["source"] != "aws.sagemaker" or event["detail-type"] != "SageMaker Training Job State Change":
        return  # not for this function at all: the handler rejects these (test_auto_stop)
    change = TrainingJobChange.from_event(event)
    assert decide(change, AutoStopConfig()).stop is default
    assert decide(change, SCOPED_CONFIG).stop is scoped


def test_rule_name_and_status_must_come_from_the_same_status_entry(synthesized):
    # VanishingGradient (allowed) is InProgress while LossNotDecreasing (not allowed) found issues
    event = event_with(debug={"VanishingGradient": "InProgress", "LossNotDecreasing": "IssuesFound"})
    assert matches(_pattern(synthesized, "scoped"), event) is False
    event["detail"]["DebugRuleEvaluationStatuses"][0]["RuleEvaluationStatus"] = "IssuesFound"
    assert matches(_pattern(synthesized, "scoped"), event) is True


# --- the matcher itself, on EventBridge's documented behaviour ------------------------------------


def test_matcher_scalar_arrays_match_when_any_element_matches():
    assert matches({"resources": ["arn:b"]}, {"resources": ["arn:a", "arn:b"]})
    assert not matches({"resources": ["arn:c"]}, {"resources": ["arn:a", "arn:b"]})


def test_matcher_values_are_typed_and_numbers_compare_as_numbers():
    assert matches({"n": [5]}, {"n": 5.0})
    assert not matches({"n": ["5"]}, {"n": 5})
    assert not matches({"flag": ["true"]}, {"flag": True})
    assert matches({"flag": [True]}, {"flag": True})
    assert matches({"x": [None]}, {"x": None})


def test_matcher_missing_field_matches_only_exists_false():
    assert not matches({"a": ["x"]}, {})
    assert matches({"a": [{"exists": False}]}, {})
    assert not matches({"a": [{"exists": False}]}, {"a": "x"})
    assert matches({"a": [{"exists": True}]}, {"a": {"nested": 1}})


def test_matcher_content_filters():
    event = {"name": "mnist-1", "size": 10}
    assert matches({"name": [{"prefix": "mnist-"}]}, event)
    assert matches({"name": [{"suffix": "-1"}]}, event)
    assert matches({"name": [{"equals-ignore-case": "MNIST-1"}]}, event)
    assert matches({"name": [{"anything-but": ["resnet-1"]}]}, event)
    assert not matches({"name": [{"anything-but": {"prefix": "mnist"}}]}, event)
    assert matches({"size": [{"numeric": [">", 5, "<=", 10]}]}, event)
    assert not matches({"size": [{"numeric": [">", 10]}]}, event)


def test_matcher_or_and_nested_objects():
    pattern = {"detail": {"$or": [{"a": ["1"]}, {"b": ["2"]}]}}
    assert matches(pattern, {"detail": {"b": "2"}})
    assert not matches(pattern, {"detail": {"a": "2", "b": "1"}})


def test_matcher_rejects_what_it_does_not_implement():
    with pytest.raises(UnsupportedPatternError, match="wildcard"):
        matches({"a": [{"wildcard": "x*"}]}, {"a": "xy"})
    with pytest.raises(UnsupportedPatternError, match="empty list"):
        matches({"a": []}, {"a": "x"})
    with pytest.raises(UnsupportedPatternError):
        matches({"a": "x"}, {"a": "x"})
