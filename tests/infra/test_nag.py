"""cdk-nag AwsSolutions on the real stacks: zero unacknowledged findings, every acknowledgement reasoned."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks

from infra.app import cdk_json_context

IAM5_JOBS = "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/{}]"


def _report(synthesized):
    (plugin,) = synthesized.validation_report()["pluginReports"]
    assert plugin["pluginName"] == "AwsSolutions"
    return plugin


def test_aws_solutions_reports_no_unacknowledged_finding(synthesized):
    plugin = _report(synthesized)
    assert plugin["conclusion"] == "success"
    assert plugin["violations"] == []


def test_exactly_the_expected_findings_are_acknowledged_each_with_a_reason(synthesized):
    acknowledged = {}
    for violation in _report(synthesized)["suppressedViolations"]:
        for construct in violation["violatingConstructs"]:
            acknowledged[(construct["constructPath"].split("/")[0], violation["ruleName"])] = violation[
                "reason"
            ]
    assert set(acknowledged) == {
        ("DebuggerAutoStop", IAM5_JOBS.format("*")),
        ("DebuggerAutoStop", "AwsSolutions-L1"),
        ("DebuggerAutoStop", "AwsSolutions-SQS3"),
        ("DebuggerAutoStop", "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]"),
        ("Scoped", IAM5_JOBS.format("mnist-*")),
        ("Scoped", "AwsSolutions-L1"),
        ("Scoped", "AwsSolutions-SQS3"),
        ("Scoped", "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]"),
        ("CustomKey", IAM5_JOBS.format("Team-A-*")),
        ("CustomKey", IAM5_JOBS.format("team-a-*")),
        ("CustomKey", "AwsSolutions-L1"),
        ("CustomKey", "AwsSolutions-SQS3"),
        ("CustomKey", "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]"),
    }
    for key, reason in acknowledged.items():
        assert len(reason) > 60, f"{key}: acknowledgement without a real reason: {reason!r}"


def test_the_checks_do_fail_a_stack_with_findings(tmp_path):
    """The same plugin set-up rejects a plain queue (no TLS policy, no DLQ): the zero above means something."""
    app = cdk.App(outdir=str(tmp_path / "cdk.out"), context=cdk_json_context())
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    sqs.Queue(cdk.Stack(app, "Bad"), "Queue")
    with pytest.raises(RuntimeError, match="ValidationFailed") as info:
        app.synth()
    assert "AwsSolutions-SQS3" in str(info.value) and "AwsSolutions-SQS4" in str(info.value)
