"""One synthesis for the whole infra session: the app's default stack and a fully configured one,
both checked by cdk-nag AwsSolutions (app.synth() raises on any unacknowledged finding)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from infra.app import build, cdk_json_context
from infra.constructs.auto_stop import AutoStop
from infra.stacks.auto_stop_stack import AutoStopStack

OPT_IN_TAG = "sdk-ext:auto-stop"  # the default stack's only scope: jobs tagged sdk-ext:auto-stop=true
SCOPED = {
    "job_name_prefix": "mnist-",
    "rule_names": ("VanishingGradient", "LowGPUUtilization"),
    "profiler_rules_can_stop": True,
    "dry_run": True,
    "notification_emails": ("ml-team@example.com",),
}


@dataclass(frozen=True)
class Synthesized:
    outdir: Path
    default: AutoStopStack  # what `cdk synth --context opt_in_tag=sdk-ext:auto-stop` builds
    scoped: AutoStopStack  # SCOPED: prefix, rule names, profiler rules, dry run, an email
    custom: (
        AutoStop  # the construct alone in a stack of its own: mixed-case prefix, topic under a customer key
    )
    templates: dict[str, Template]  # by name: "default", "scoped", "custom"
    raw: dict[str, dict[str, Any]]  # the template JSON, by the same ids

    def validation_report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads((self.outdir / "validation-report.json").read_text())
        return report


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    outdir = tmp_path_factory.mktemp("cdk") / "cdk.out"
    app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "opt_in_tag": OPT_IN_TAG})
    default = build(app)
    scoped = AutoStopStack(app, "Scoped", **SCOPED)
    custom_stack = cdk.Stack(app, "CustomKey")
    key = kms.Key(custom_stack, "TopicKey", enable_key_rotation=True)
    custom = AutoStop(custom_stack, "AutoStop", job_name_prefix="Team-A-", topic_key=key)
    assembly = app.synth()  # cdk-nag runs here: raises on any unacknowledged finding
    stacks = {"default": default, "scoped": scoped, "custom": custom_stack}
    raw = {name: assembly.get_stack_artifact(stack.artifact_id).template for name, stack in stacks.items()}
    templates = {name: Template.from_stack(stack) for name, stack in stacks.items()}
    return Synthesized(outdir, default, scoped, custom, templates, raw)
