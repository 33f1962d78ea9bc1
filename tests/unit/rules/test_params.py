"""Rule parameters arrive as strings; bad ones are reported by name and value, all at once."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdk_ext.exceptions import ConfigError
from sdk_ext.modes import ModeKeys
from sdk_ext.rules import BUILTIN_RULES, DeadRelu, LossNotDecreasing, VanishingGradient, WeightUpdateRatio
from sdk_ext.rules.params import ParamParser
from tests.unit.rules.fake_trial import FakeTrial


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_round_trip_through_their_string_form(x):
    p = ParamParser("R")
    assert p.number("x", repr(x)) == x
    assert p.number("x", x) == x
    p.done()


@pytest.mark.parametrize("text, expected", [("True", True), ("true", True), (" 1 ", True), ("yes", True),
                                            ("False", False), ("FALSE", False), ("0", False), ("no", False)])
def test_flags(text, expected):
    assert ParamParser("R").flag("f", text) is expected


def test_lists_strip_blanks_and_drop_empties():
    p = ParamParser("R")
    assert p.strings("c", "loss, losses,, ") == ["loss", "losses"]
    assert p.strings("c", None) == [] and p.strings("c", "None") == []
    assert p.numbers("t", "10, 90") == [10.0, 90.0]
    assert p.integers("v", "3,0") == [3, 0]
    assert p.mode("m", "ModeKeys.EVAL") is ModeKeys.EVAL and p.mode("m", "None") is None
    assert p.maybe_number("m", "") is None and p.maybe_integer("m", "null") is None
    p.done()


def test_every_problem_is_reported_with_its_parameter_and_value():
    p = ParamParser("MyRule")
    p.number("threshold", "abc")
    p.integer("num_steps", "2.5")
    p.flag("only_nan", "maybe")
    p.number("large", "-1", ge=0)
    p.regexes("tensor_regex", "([")
    p.mode("mode", "TRAINING")
    with pytest.raises(ConfigError) as err:
        p.done()
    text = str(err.value)
    assert "parameters of rule MyRule" in text and "6 problems" in text
    for fragment in ("threshold='abc'", "num_steps='2.5'", "only_nan='maybe'", "large='-1'", "tensor_regex='(['",
                     "mode='TRAINING'"):
        assert fragment in text


def test_nan_and_inf_are_not_accepted_as_thresholds():
    p = ParamParser("R")
    assert math.isnan(p.number("t", "nan"))
    p.number("t2", "inf")
    with pytest.raises(ConfigError, match="t='nan'"):
        p.done()


def test_rule_constructors_name_the_bad_parameter_and_value():
    t = FakeTrial()
    with pytest.raises(ConfigError, match=r"threshold='1e-7x'"):
        VanishingGradient(t, threshold="1e-7x")
    with pytest.raises(ConfigError, match=r"num_steps='ten'.*\n.*diff_percent='-1'"):
        LossNotDecreasing(t, num_steps="ten", diff_percent="-1")
    with pytest.raises(ConfigError, match="small_threshold='20' must be below large_threshold='10'"):
        WeightUpdateRatio(t, small_threshold="20", large_threshold="10")
    with pytest.raises(ConfigError, match="threshold_layer='150'"):
        DeadRelu(t, threshold_layer="150")


def test_string_parameters_are_equivalent_to_python_values():
    t = FakeTrial()
    a = LossNotDecreasing(t, tensor_regex="loss, losses", num_steps="10", diff_percent="0.1",
                          use_losses_collection="False", mode="TRAIN")
    b = LossNotDecreasing(t, tensor_regex=["loss", "losses"], num_steps=10, diff_percent=0.1,
                          use_losses_collection=False, mode=ModeKeys.TRAIN)
    for attr in ("tensor_regex", "num_steps", "diff_percent", "use_losses_collection", "mode"):
        assert getattr(a, attr) == getattr(b, attr)


def test_every_builtin_accepts_its_defaults_given_as_strings():
    import inspect

    for name, cls in BUILTIN_RULES.items():
        kwargs = {}
        for p in inspect.signature(cls).parameters.values():
            if (p.kind is p.POSITIONAL_OR_KEYWORD and p.name not in ("base_trial", "other_trials")
                    and p.default is not None and p.default is not inspect.Parameter.empty):
                kwargs[p.name] = str(p.default)
        extra = {"other_trials": [FakeTrial()]} if name == "SimilarAcrossRuns" else {}
        if name in ("AllZero", "TensorVariance"):
            kwargs["tensor_regex"] = "w"
        if name == "TensorVariance":
            kwargs["max_threshold"] = "10"
        rule = cls(FakeTrial(), **extra, **kwargs)
        assert rule.rule_name == name
