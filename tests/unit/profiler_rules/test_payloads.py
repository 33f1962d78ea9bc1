"""What sdk_ext.debugger sends for a profiler rule is what the rule evaluator runs: every rulesconfig profiler
rule's payload builds the rule with rulesconfig's parameters, and the defaults agree."""

from __future__ import annotations

import inspect

import pytest
from smdebug_rulesconfig.profiler_rules import rules as rulesconfig

from sdk_ext.debugger import ProfilerRule
from sdk_ext.exceptions import ConfigError
from sdk_ext.profiler.analysis.rules import PROFILER_RULES, ProfilerReport, find_profiler_rule
from sdk_ext.rules.builtin import PROFILER_RULE_NAMES
from sdk_ext.rules.factory import build_rule, split_parameters
from tests.unit.profiler_rules.events import FakeProfilerData

CONFIGS = ["BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck", "LoadBalancing",
           "LowGPUUtilization", "MaxInitializationTime", "OverallSystemUsage", "StepOutlier"]


def _sent(config) -> dict[str, str]:
    return ProfilerRule.sagemaker(config).to_profiler_rule_config_dict()["RuleParameters"]


@pytest.mark.parametrize("name", CONFIGS)
def test_the_sdks_payload_builds_the_rule_with_its_parameters(name):
    sent = _sent(getattr(rulesconfig, name)())
    request = split_parameters(sent)
    cls = find_profiler_rule(request.rule_to_invoke)
    assert cls is PROFILER_RULES[name]
    rule = build_rule(cls, FakeProfilerData([]), request.parameters)
    for key, value in request.parameters.items():
        got = getattr(rule, key)
        assert (got is None and value == "None") or float(got) == float(value), key


@pytest.mark.parametrize("name", CONFIGS)
def test_defaults_are_rulesconfigs(name):
    ours = inspect.signature(PROFILER_RULES[name]).parameters
    theirs = inspect.signature(getattr(rulesconfig, name)).parameters
    for key, parameter in theirs.items():
        assert ours[key].default == parameter.default, f"{name}.{key}"
    extra = set(ours) - set(theirs) - {"base_trial", "action_str"}
    assert extra == ({"patience"} if name == "Dataloader" else set())  # the 2020 class's patience, default 10


def test_profiler_report_overrides_as_rulesconfig_sends_them():
    sent = _sent(rulesconfig.ProfilerReport(CPUBottleneck_threshold=90, lowgpuutilization_window=100))
    request = split_parameters(sent)
    rule = build_rule(ProfilerReport, FakeProfilerData([]), request.parameters)
    by_name = {r.rule_name: r for r in rule.rules}
    assert by_name["CPUBottleneck"].threshold == 90 and by_name["LowGPUUtilization"].window == 100
    assert by_name["StepOutlier"].stddev == 3  # the others keep their defaults


def test_profiler_report_takes_newer_rulesconfigs_nested_parameters():
    # rulesconfig >= 1.0.2 nests them; the SDK str()s the dict, so it arrives as Python's repr
    params = {"opt_out_telemetry": "False",
              "custom_rule_parameters": str({"StepOutlier_n_outliers": 3, "BatchSize_window": 50})}
    rule = build_rule(ProfilerReport, FakeProfilerData([]), params)
    by_name = {r.rule_name: r for r in rule.rules}
    assert by_name["StepOutlier"].n_outliers == 3 and by_name["BatchSize"].window == 50


@pytest.mark.parametrize(("params", "message"), [
    ({"CPUBottlenek_threshold": "9"}, "CPUBottlenek_threshold: expected <Rule>_<parameter> with a rule among"),
    ({"StepOutlier_stdev": "9"}, "StepOutlier has no parameter 'stdev'; it takes stddev, mode, n_outliers"),
    ({"StepOutlier_stddev": "x"}, "StepOutlier_stddev='x': expected a finite number"),
    ({"custom_rule_parameters": "[1]"}, "custom_rule_parameters='[1]': expected a JSON object"),
])
def test_profiler_report_names_each_bad_override(params, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        build_rule(ProfilerReport, FakeProfilerData([]), params)


def test_unknown_parameter_of_a_profiler_rule_is_an_error_naming_what_it_takes():
    with pytest.raises(ConfigError, match=r"treshold_p95='50'.*it takes: threshold_p95, threshold_p5"):
        build_rule(PROFILER_RULES["LowGPUUtilization"], FakeProfilerData([]), {"treshold_p95": "50"})


def test_the_rule_registry_and_the_tensor_rules_names_agree():
    assert set(PROFILER_RULE_NAMES) == set(PROFILER_RULES)
    assert find_profiler_rule(" lowgpuutilization ") is PROFILER_RULES["LowGPUUtilization"]
    assert find_profiler_rule("VanishingGradient") is None
