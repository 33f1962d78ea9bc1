"""cdk-nag's Serverless pack on the real stack: what it finds beyond AwsSolutions, and why each stays.

Not part of the app's checks (AwsSolutions is); this test keeps the report honest: a finding that goes
away or a new one fails it, so the list below is what the Serverless pack says today.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from cdk_nag import ServerlessChecks

from infra.app import build, cdk_json_context
from infra.stacks.auto_stop_stack import AutoStopStack
from tests.infra.conftest import OPT_IN_TAG, SCOPED

# rule -> why it does not apply or is not worth its cost here. Fixed: Serverless-LambdaAsyncFailureDestination
# (the function's failed events go to an on-failure destination, whose record carries the error too); the
# pack then asks for a function DLQ as well, which would put every failed event into the queue twice.
ACCEPTED = {
    "Serverless-LambdaDLQ": "the on-failure destination (the same queue) replaces the function's DLQ",
    "Serverless-SQSRedrivePolicy": "the queue it flags is the dead-letter queue itself; an alarm watches it",
    "Serverless-LambdaLatestVersion": "Python 3.13 is pinned on purpose (AwsSolutions-L1 acknowledgement)",
    "Serverless-LambdaTracing": "X-Ray needs xray:Put* on '*'; the JSON decision line and the alarms suffice",
    "Serverless-SNSRedrivePolicy": "email subscriptions only; SNS retries email delivery itself",
}


def test_the_serverless_pack_finds_only_the_accepted_rules(tmp_path):
    outdir = tmp_path / "cdk.out"
    app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "opt_in_tag": OPT_IN_TAG})
    cdk.Validations.of(app).add_plugins(ServerlessChecks(app))
    build(app)  # also adds AwsSolutions
    AutoStopStack(app, "Scoped", **SCOPED)
    try:
        app.synth()
    except RuntimeError as err:  # the Serverless findings are not acknowledged: synthesis reports them
        assert "ValidationFailed" in str(err)
    report = json.loads((outdir / "validation-report.json").read_text())
    plugins = {p["pluginName"]: p for p in report["pluginReports"]}
    assert plugins["AwsSolutions"]["conclusion"] == "success"
    found = {v["ruleName"] for v in plugins["Serverless"]["violations"]}
    assert found == set(ACCEPTED)
    assert all(len(reason) > 40 for reason in ACCEPTED.values())
