"""RuleParameters -> rule object, the way SageMaker's evaluator builds it (docs/RULES.md#as-sagemaker-sends-them)."""

from __future__ import annotations

import textwrap

import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.rules import Rule, VanishingGradient, get_builtin_rule
from sdk_ext.rules.builtin import rule_parameter_names
from sdk_ext.rules.factory import build_rule, load_rule_class, smdebug_aliases, split_parameters
from tests.unit.rules.fake_trial import FakeTrial


def test_split_takes_out_reserved_keys():
    req = split_parameters({"rule_to_invoke": "VanishingGradient", "threshold": "0.01", "start_step": "17",
                            "end_step": "19", "other_trial_1": "s3://b/t1", "other_trial_0": "s3://b/t0",
                            "action_json": '{"name": "sms", "endpoint": "+1"}'})
    assert req.rule_to_invoke == "VanishingGradient" and req.parameters == {"threshold": "0.01"}
    assert (req.start_step, req.end_step) == (17, 19)
    assert req.other_trials == ("s3://b/t0", "s3://b/t1")
    assert req.action_json.startswith("{")


@pytest.mark.parametrize("params, fragment", [
    ({"start_step": "x"}, "start_step='x'"),
    ({"end_step": "-3"}, "end_step='-3'"),
    ({"start_step": "5", "end_step": "5"}, "end_step='5': must be greater than start_step"),
    ({"other_trial_1": "p"}, "numbered 0, 1, 2"),
])
def test_split_reports_bad_reserved_values(params, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(")):
        split_parameters(params)


def test_builtin_rule_names_are_case_insensitive_and_unknown_ones_list_the_valid_ones():
    assert get_builtin_rule(" vanishinggradient ") is VanishingGradient
    with pytest.raises(ConfigError, match="'VanishingGradients' is not a built-in rule; use one of: .*TreeDepth"):
        get_builtin_rule("VanishingGradients")
    with pytest.raises(ConfigError, match="is a profiler rule: it judges a job's profiler output"):
        get_builtin_rule("CPUBottleneck")
    with pytest.raises(ConfigError, match="report or post-processing job"):
        get_builtin_rule("CreateXgboostReport")


def test_builtin_unknown_parameter_is_an_error_naming_it():
    with pytest.raises(ConfigError, match=r"treshold='0.1'.*it takes: threshold"):
        build_rule(VanishingGradient, FakeTrial(), {"treshold": "0.1"})
    rule = build_rule(VanishingGradient, FakeTrial(), {"threshold": "0.1"})
    assert rule.threshold == 0.1


def test_parameter_names_are_the_constructor_arguments():
    assert rule_parameter_names(VanishingGradient) == ["threshold"]


class Custom(Rule):
    def __init__(self, base_trial, needed, other_trials, threshold="1.0", action_str=""):
        super().__init__(base_trial, action_str, other_trials)
        self.needed, self.threshold = needed, float(threshold)

    def invoke_at_step(self, step):
        return False


def test_custom_rule_gets_required_optional_other_trials_and_actions():
    other = FakeTrial()
    rule = build_rule(Custom, FakeTrial(), {"needed": "x", "threshold": "2", "extra": "ignored"},
                      other_trials=[other], action_str='{"name": "sms", "endpoint": "+1"}')
    assert rule.needed == "x" and rule.threshold == 2.0 and rule.other_trials == [other]
    assert rule.has_actions  # parsed from action_str


def test_custom_rule_missing_required_parameter():
    with pytest.raises(ConfigError, match="required parameter 'needed' for rule Custom is missing"):
        build_rule(Custom, FakeTrial(), {})


def test_a_custom_rule_that_ignores_action_str_still_gets_its_actions():
    class NoAction(Rule):
        def __init__(self, base_trial):
            super().__init__(base_trial)

        def invoke_at_step(self, step):
            return False

    rule = build_rule(NoAction, FakeTrial(), {}, action_str='{"name": "email", "endpoint": "a@b.c"}')
    assert rule.has_actions


SMDEBUG_RULE = textwrap.dedent('''
    from smdebug.rules.rule import Rule
    from smdebug.exceptions import TensorUnavailableForStep

    class CustomGradientRule(Rule):
        def __init__(self, base_trial, threshold=10.0):
            super().__init__(base_trial)
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            for tname in self.base_trial.tensor_names(collection="gradients"):
                t = self.base_trial.tensor(tname)
                if t.reduction_value(step, "mean", abs=True) > self.threshold:
                    return True
            return False
''')


def test_a_rule_file_written_for_smdebug_loads_through_the_aliases(tmp_path):
    source = tmp_path / "my_rule.py"
    source.write_text(SMDEBUG_RULE)
    with smdebug_aliases():
        cls = load_rule_class(source, "CustomGradientRule")
    assert issubclass(cls, Rule)
    rule = build_rule(cls, FakeTrial(), {"threshold": "5"})
    assert rule.threshold == 5.0


def test_the_same_rule_after_swapping_the_import_loads_without_aliases(tmp_path):
    source = tmp_path / "my_rule.py"
    source.write_text(SMDEBUG_RULE.replace("smdebug.rules.rule", "sdk_ext.rules.rule")
                      .replace("smdebug.exceptions", "sdk_ext.exceptions"))
    assert load_rule_class(source, "CustomGradientRule").__name__ == "CustomGradientRule"


def test_loading_errors_name_the_file_and_the_class(tmp_path):
    source = tmp_path / "r.py"
    source.write_text("from sdk_ext.rules import Rule\nclass A(Rule):\n    def invoke_at_step(self, s):\n"
                      "        return False\n")
    with pytest.raises(ConfigError, match=r"rule_to_invoke='B'.*found: A"):
        load_rule_class(source, "B")
    with pytest.raises(ConfigError, match="is not a file"):
        load_rule_class(tmp_path / "missing.py", "A")
    (tmp_path / "bad.py").write_text("def (:\n")
    with pytest.raises(ConfigError, match="SyntaxError"):
        load_rule_class(tmp_path / "bad.py", "A")
