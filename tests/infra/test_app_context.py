"""infra/app.py context values and the AutoStop construct's argument checks (no synthesis)."""

from __future__ import annotations

import aws_cdk as cdk
import pytest

from infra.app import AppSettings, ContextError
from infra.constructs.auto_stop import AutoStop


def test_no_scope_refuses_to_synthesize_naming_the_context_to_pass():
    """Without a job prefix or an opt-in tag every training job in the account could be stopped."""
    with pytest.raises(ContextError) as info:
        AppSettings.from_context(cdk.App())
    assert "--context job_prefix=" in str(info.value) and "--context opt_in_tag=" in str(info.value)
    assert AppSettings.from_context(cdk.App(context={"opt_in_tag": "sdk-ext:auto-stop"})) == AppSettings(
        opt_in_tag="sdk-ext:auto-stop"
    )


def test_main_prints_the_problem_and_exits_2_without_a_traceback(capsys, monkeypatch):
    from infra import app

    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)  # how the CLI passes context: none here
    with pytest.raises(SystemExit) as info:
        app.main()
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("infra.app: invalid context: no scope: ")


def test_context_values_from_the_command_line_are_parsed():
    app = cdk.App(
        context={
            "job_prefix": "mnist-",
            "rule_names": "VanishingGradient, ExplodingTensor",
            "dry_run": "true",
            "notification_email": "a@example.com,b@example.com",
            "profiler_rules": "false",
            "stack_name": "Stopper",
        }
    )
    assert AppSettings.from_context(app) == AppSettings(
        stack_name="Stopper",
        job_prefix="mnist-",
        rule_names=("VanishingGradient", "ExplodingTensor"),
        dry_run=True,
        notification_emails=("a@example.com", "b@example.com"),
        profiler_rules=False,
    )


def test_context_values_from_cdk_json_may_be_typed():
    app = cdk.App(context={"rule_names": ["VanishingGradient"], "dry_run": True, "job_prefix": "m-"})
    settings = AppSettings.from_context(app)
    assert settings.rule_names == ("VanishingGradient",) and settings.dry_run is True


def test_invalid_context_names_the_exact_context_to_pass():
    app = cdk.App(context={"dry_run": "maybe", "profiler_rules": "sometimes"})
    with pytest.raises(ContextError) as info:
        AppSettings.from_context(app)
    assert "--context dry_run=true" in str(info.value)
    assert "--context profiler_rules=true" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"job_name_prefix": "prod_*"}, "job_name_prefix='prod_*'"),
        ({}, "no scope: without job_name_prefix or opt_in_tag every training job"),
        ({"opt_in_tag": "aws:auto-stop"}, "opt_in_tag='aws:auto-stop'"),
        ({"opt_in_tag": "stop*me"}, "opt_in_tag='stop*me'"),
        ({"rule_names": ["Vanishing,Gradient"]}, "rule name 'Vanishing,Gradient'"),
        ({"notification_emails": ["not-an-address"]}, "notification email 'not-an-address'"),
    ],
)
def test_construct_rejects_bad_arguments_naming_them(kwargs, message, tmp_path):
    with pytest.raises(ValueError, match="AutoStop: .*" + message.replace("*", r"\*")):
        AutoStop(cdk.Stack(cdk.App(outdir=str(tmp_path)), "S"), "AutoStop", **kwargs)


def test_construct_rejects_a_code_path_without_the_handler(tmp_path):
    with pytest.raises(ValueError, match="missing auto_stop.py, auto_stop_policy.py"):
        AutoStop(cdk.Stack(cdk.App(outdir=str(tmp_path)), "S"), "AutoStop", job_name_prefix="m-", code_path=tmp_path)
