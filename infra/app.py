"""The CDK app (cdk.json: ``python3 -m infra.app``): one AutoStopStack, checked by cdk-nag AwsSolutions.

Context values (``npx cdk synth --context key=value``, or "context" in cdk.json); one of job_prefix and
opt_in_tag is required (without either, every training job in the account could be stopped, and the app
refuses to synthesize):
    job_prefix          only training jobs whose name starts with this can be stopped
    opt_in_tag          only training jobs tagged with this key and the value "true" can be stopped
    rule_names          comma-separated rule configuration names that may stop a job (default: any)
    dry_run             true: log and notify, never stop (default: false)
    notification_email  comma-separated addresses subscribed to an encrypted SNS topic (default: none)
    profiler_rules      true: profiler rules may stop jobs too (default: false)
    stack_name          default DebuggerAutoStop
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.stacks.auto_stop_stack import AutoStopStack

_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no", ""}
CDK_JSON = Path(__file__).resolve().parents[1] / "cdk.json"


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's "context": the feature flags ``cdk init`` writes for the pinned aws-cdk-lib, and settings.

    The CDK CLI hands these to the app itself; an app built outside the CLI (the tests) passes them as
    ``cdk.App(context=cdk_json_context())`` so that it synthesizes what ``cdk synth`` synthesizes.
    """
    context: dict[str, Any] = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
    return context


class ContextError(ValueError):
    """A context value is invalid; the message names the exact ``--context key=value`` to pass."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AppSettings:
    """The app's context values, parsed."""

    stack_name: str = "DebuggerAutoStop"
    job_prefix: str = ""
    opt_in_tag: str = ""
    rule_names: tuple[str, ...] = ()
    dry_run: bool = False
    notification_emails: tuple[str, ...] = ()
    profiler_rules: bool = False

    @classmethod
    def from_context(cls, node: cdk.App) -> AppSettings:
        """Read the context values of the module docstring from ``node``.

        Raises:
            ContextError: listing every invalid value with the ``--context`` form that fixes it.
        """
        problems: list[str] = []

        def text(key: str, default: str = "") -> str:
            value = node.node.try_get_context(key)
            if value is None:
                return default
            if isinstance(value, list):
                return ",".join(str(v) for v in value)
            return str(value).strip()

        def flag(key: str) -> bool:
            value = text(key).lower()
            if value not in _TRUE | _FALSE:
                problems.append(f"{key}={text(key)!r}: pass --context {key}=true or --context {key}=false")
            return value in _TRUE

        def items(key: str) -> tuple[str, ...]:
            return tuple(v.strip() for v in text(key).split(",") if v.strip())

        settings = cls(
            stack_name=text("stack_name", "DebuggerAutoStop"),
            job_prefix=text("job_prefix"),
            opt_in_tag=text("opt_in_tag"),
            rule_names=items("rule_names"),
            dry_run=flag("dry_run"),
            notification_emails=items("notification_email"),
            profiler_rules=flag("profiler_rules"),
        )
        if not settings.job_prefix and not settings.opt_in_tag:
            problems.append(
                "no scope: pass --context job_prefix=PREFIX (only jobs whose name starts with it) and/or "
                "--context opt_in_tag=sdk-ext:auto-stop (only jobs tagged sdk-ext:auto-stop=true); without "
                "either, every training job in the account and region could be stopped"
            )
        if problems:
            raise ContextError("invalid context: " + "; ".join(problems))
        return settings


def build(app: cdk.App) -> AutoStopStack:
    """Add cdk-nag's AwsSolutions checks and the stack the context asks for to ``app``."""
    settings = AppSettings.from_context(app)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    account, region = os.environ.get("CDK_DEFAULT_ACCOUNT"), os.environ.get("CDK_DEFAULT_REGION")
    return AutoStopStack(
        app,
        settings.stack_name,
        job_name_prefix=settings.job_prefix,
        opt_in_tag=settings.opt_in_tag,
        rule_names=settings.rule_names,
        profiler_rules_can_stop=settings.profiler_rules,
        dry_run=settings.dry_run,
        notification_emails=settings.notification_emails,
        env=cdk.Environment(account=account, region=region) if account and region else None,
    )


def main() -> None:
    app = cdk.App()
    try:
        build(app)
    except (ContextError, ValueError) as err:  # say what to pass, without a traceback
        print(f"infra.app: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    app.synth()


if __name__ == "__main__":
    main()
