"""The deployable stack: one AutoStop and outputs naming what it created."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnOutput, Environment, Stack
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.constructs.auto_stop import AutoStop


class AutoStopStack(Stack):
    """Stops SageMaker training jobs when a Debugger rule reports IssuesFound (see AutoStop)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_name_prefix: str = "",
        opt_in_tag: str = "",
        rule_names: Sequence[str] = (),
        profiler_rules_can_stop: bool = False,
        dry_run: bool = False,
        notification_emails: Sequence[str] = (),
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        env: Environment | None = None,
    ) -> None:
        """Create it; the keyword arguments are AutoStop's (see there)."""
        super().__init__(
            scope,
            construct_id,
            env=env,
            description="sdk_ext: stop SageMaker training jobs when a Debugger rule reports IssuesFound",
        )
        self.auto_stop = AutoStop(
            self,
            "AutoStop",
            job_name_prefix=job_name_prefix,
            opt_in_tag=opt_in_tag,
            rule_names=rule_names,
            profiler_rules_can_stop=profiler_rules_can_stop,
            dry_run=dry_run,
            notification_emails=notification_emails,
            log_retention=log_retention,
        )
        CfnOutput(self, "FunctionName", value=self.auto_stop.function.function_name)
        CfnOutput(self, "RuleName", value=self.auto_stop.rule.rule_name)
        CfnOutput(self, "DeadLetterQueueUrl", value=self.auto_stop.dead_letter_queue.queue_url)
        CfnOutput(self, "LogGroupName", value=self.auto_stop.log_group.log_group_name)
        CfnOutput(self, "TopicArn", value=self.auto_stop.topic.topic_arn)
        CfnOutput(self, "ErrorsAlarmName", value=self.auto_stop.errors_alarm.alarm_name)
        CfnOutput(self, "DeadLetterAlarmName", value=self.auto_stop.dead_letter_alarm.alarm_name)
