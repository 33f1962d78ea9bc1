"""lambda/auto_stop_policy.py: configuration from the environment and the pure stop decision."""

from __future__ import annotations

import pytest
from auto_stop_policy import AutoStopConfig, ConfigError, RuleKind, TrainingJobChange, decide

from tests.sagemaker_events import JOB, captured_event, event_with, profiler_only_event


def test_empty_environment_gives_the_safe_defaults():
    config = AutoStopConfig.from_env({})
    assert config == AutoStopConfig()
    assert config.rule_names is None and config.job_name_prefix == ""
    assert config.profiler_rules_can_stop is False and config.dry_run is False and config.topic_arn is None


def test_environment_is_parsed():
    config = AutoStopConfig.from_env(
        {
            "AUTO_STOP_RULE_NAMES": "VanishingGradient, ExplodingTensor,,",
            "AUTO_STOP_JOB_PREFIX": " mnist- ",
            "AUTO_STOP_PROFILER_RULES": "TRUE",
            "AUTO_STOP_DRY_RUN": "1",
            "AUTO_STOP_TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:t",
        }
    )
    assert config.rule_names == {"VanishingGradient", "ExplodingTensor"}
    assert config.job_name_prefix == "mnist-"
    assert config.profiler_rules_can_stop is True and config.dry_run is True
    assert config.topic_arn == "arn:aws:sns:us-east-1:123456789012:t"


@pytest.mark.parametrize("value", ["false", "0", "no", "off", ""])
def test_false_spellings(value):
    assert AutoStopConfig.from_env({"AUTO_STOP_DRY_RUN": value}).dry_run is False


def test_every_invalid_variable_is_reported_at_once():
    with pytest.raises(ConfigError) as info:
        AutoStopConfig.from_env(
            {
                "AUTO_STOP_PROFILER_RULES": "sometimes",
                "AUTO_STOP_TOPIC_ARN": "debugger-topic",
                "AUTO_STOP_JOB_PREFIX": "-x",
            }
        )
    message = str(info.value)
    assert "AUTO_STOP_PROFILER_RULES='sometimes'" in message
    assert "AUTO_STOP_TOPIC_ARN='debugger-topic'" in message
    assert "AUTO_STOP_JOB_PREFIX='-x'" in message


def test_event_is_parsed_into_rule_statuses_of_both_kinds():
    change = TrainingJobChange.from_event(captured_event())
    assert change.job_name == JOB and change.job_status == "InProgress"
    assert change.event_id == "844e2571-85d4-695f-b930-0153b71dcb42"
    assert [(r.name, r.status, r.kind) for r in change.rules] == [
        ("VanishingGradient", "IssuesFound", RuleKind.DEBUGGER),
        ("LossNotDecreasing", "InProgress", RuleKind.DEBUGGER),
        ("ProfilerReport", "InProgress", RuleKind.PROFILER),
    ]
    assert change.rules[0].details.startswith(
        "RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient"
    )


def test_decision_is_pure_and_explains_itself():
    change = TrainingJobChange.from_event(event_with(debug={"LossNotDecreasing": "IssuesFound"}))
    decision = decide(change, AutoStopConfig())
    assert decision.stop is True
    assert [r.name for r in decision.rules] == ["VanishingGradient", "LossNotDecreasing"]
    assert decision.reason == "VanishingGradient, LossNotDecreasing reported IssuesFound"
    assert decide(change, AutoStopConfig()) == decision


def test_error_status_of_a_rule_never_stops():
    change = TrainingJobChange.from_event(event_with(debug={"VanishingGradient": "Error"}))
    assert decide(change, AutoStopConfig()).stop is False


def test_profiler_rule_must_also_be_in_the_allow_list_when_one_is_given():
    change = TrainingJobChange.from_event(profiler_only_event())
    allowed = AutoStopConfig(profiler_rules_can_stop=True, rule_names=frozenset({"VanishingGradient"}))
    assert decide(change, allowed).stop is False
    both = AutoStopConfig(profiler_rules_can_stop=True, rule_names=frozenset({"ProfilerReport"}))
    assert decide(change, both).stop is True
