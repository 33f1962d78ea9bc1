"""AutoStop: stop a SageMaker training job when one of its Debugger rules reports IssuesFound.

EventBridge rule (IssuesFound in DebugRuleEvaluationStatuses of an InProgress job) -> Lambda
(lambda/auto_stop.py, a plain asset) -> sagemaker:StopTrainingJob. The scope is always explicit: a job
name prefix, an opt-in tag (``StopTrainingJob`` carries an ``aws:ResourceTag/<tag>: true`` condition, which
the training-job resource type supports per the service authorization reference), or both; without
either the construct refuses to synthesize. Least privilege: the function's role may only describe,
(with a tag) list the tags of, and stop training jobs in that scope, write its own log group, send to its
dead-letter queue and publish to its topic. Failed deliveries and failed invocations (after retries) land
in one encrypted dead-letter queue. Two alarms tell the topic when auto-stop itself breaks: any error of
the function, and any message in the dead-letter queue. The topic is encrypted with a customer-managed
KMS key, because CloudWatch alarms cannot publish to a topic under the AWS-managed ``alias/aws/sns`` key
(its key policy cannot grant cloudwatch.amazonaws.com kms:Decrypt/GenerateDataKey*).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Acknowledgment, ArnFormat, Duration, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

LAMBDA_DIR = Path(__file__).resolve().parents[2] / "lambda"
HANDLER_FILES = ("auto_stop.py", "auto_stop_policy.py")  # everything else in lambda/ stays out of the asset
_PREFIX = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9-]{0,62}")  # start of a TrainingJobName
_RULE_NAME = re.compile(r"[^,\s][^,]{0,255}")  # RuleConfigurationName: 1-256 chars; commas split the env var
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
# a SageMaker tag key (letters, digits, spaces, _.:/=+-@; 1-128), not in the reserved aws: namespace
_TAG_KEY = re.compile(r"(?!aws:)[\w .:/=+\-@]{1,128}")
OPT_IN_VALUE = "true"  # the opt-in tag's value (lambda/auto_stop_policy.py checks the same)


class AutoStop(Construct):
    """The auto-stop function, its trigger, role, logs, dead-letter queue and optional topic.

    Attributes:
        function: the Lambda function.
        role: its IAM role.
        log_group: its log group (explicit, with retention).
        rule: the EventBridge rule.
        dead_letter_queue: receives events EventBridge could not deliver and invocations that failed
            after Lambda's retries.
        topic: the SNS topic told about every stop and every alarm.
        topic_key: the customer-managed KMS key encrypting the topic.
        errors_alarm: in alarm when the function reports an error (1 or more in a minute).
        dead_letter_alarm: in alarm while the dead-letter queue holds a message.
        event_pattern: the rule's event pattern as plain JSON.
    """

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
        topic_key: kms.IKey | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.THREE_MONTHS,
        code_path: Path = LAMBDA_DIR,
    ) -> None:
        """Create it.

        Args:
            scope: parent construct.
            construct_id: id within ``scope``.
            job_name_prefix: only training jobs whose name starts with this can be stopped (IAM, pattern
                and handler all enforce it); "" means any name, allowed only with ``opt_in_tag``.
            opt_in_tag: only training jobs tagged with this key and the value "true" can be stopped (an
                ``aws:ResourceTag`` condition on StopTrainingJob; the handler checks ListTags first); ""
                means no tag is needed, allowed only with ``job_name_prefix``.
            rule_names: rule configuration names that may stop a job; empty means any Debugger rule.
            profiler_rules_can_stop: let profiler rules (e.g. LowGPUUtilization) stop jobs too.
            dry_run: decide, log and notify, but never call StopTrainingJob.
            notification_emails: subscribed to the topic (stops and alarms).
            topic_key: customer-managed KMS key encrypting the topic; default a new one, with rotation.
                A key of your own must let cloudwatch.amazonaws.com use it (kms:Decrypt,
                kms:GenerateDataKey*), or the alarms cannot publish; a key defined in this app gets that
                grant here.
            log_retention: how long the function's logs are kept.
            code_path: the directory holding auto_stop.py (default: the repository's lambda/).

        Raises:
            ValueError: listing every invalid argument.
        """
        super().__init__(scope, construct_id)
        rule_names = tuple(rule_names)
        _validate(job_name_prefix, opt_in_tag, rule_names, notification_emails, code_path)
        stack = Stack.of(self)

        self.event_pattern = event_pattern(
            job_name_prefix=job_name_prefix,
            rule_names=rule_names,
            profiler_rules_can_stop=profiler_rules_can_stop,
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            retention_period=Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        self.log_group = logs.LogGroup(self, "LogGroup", retention=log_retention)

        self.topic_key = topic_key or kms.Key(
            self,
            "TopicKey",
            description="Debugger auto-stop: encrypts the notification topic (stops and alarms)",
            enable_key_rotation=True,
        )
        # CloudWatch alarms publish to an encrypted topic only if the key lets them (key policy)
        self.topic_key.grant(
            iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*"
        )
        self.topic = sns.Topic(
            self, "Topic", display_name="Debugger auto-stop", master_key=self.topic_key, enforce_ssl=True
        )
        for email in notification_emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        # enforce_ssl replaces SNS's default topic policy: allow this account's alarms to publish
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowThisAccountsAlarms",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                    "StringEquals": {"aws:SourceAccount": stack.account},
                },
            )
        )

        # SageMaker has written job names into ARNs lower-cased; IAM compares ARNs case-sensitively
        job_patterns = list(dict.fromkeys([f"{job_name_prefix}*", f"{job_name_prefix.lower()}*"]))
        training_jobs = [
            stack.format_arn(
                service="sagemaker",
                resource="training-job",
                resource_name=pattern,
                arn_format=ArnFormat.SLASH_RESOURCE_NAME,
            )
            for pattern in job_patterns
        ]
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Debugger auto-stop: describe and stop matching training jobs, write own logs",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeTrainingJobs",
                actions=["sagemaker:DescribeTrainingJob", *(["sagemaker:ListTags"] if opt_in_tag else [])],
                resources=training_jobs,
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="StopTrainingJobs",
                actions=["sagemaker:StopTrainingJob"],
                resources=training_jobs,
                conditions=(
                    {"StringEquals": {f"aws:ResourceTag/{opt_in_tag}": OPT_IN_VALUE}} if opt_in_tag else None
                ),
            )
        )
        self.log_group.grant_write(self.role)

        environment = {
            "AUTO_STOP_RULE_NAMES": ",".join(rule_names),
            "AUTO_STOP_JOB_PREFIX": job_name_prefix,
            "AUTO_STOP_OPT_IN_TAG": opt_in_tag,
            "AUTO_STOP_PROFILER_RULES": str(profiler_rules_can_stop).lower(),
            "AUTO_STOP_DRY_RUN": str(dry_run).lower(),
        }
        environment["AUTO_STOP_TOPIC_ARN"] = self.topic.topic_arn
        self.function = lambda_.Function(
            self,
            "Function",
            description="Stops a SageMaker training job when a Debugger rule reports IssuesFound",
            runtime=lambda_.Runtime.PYTHON_3_13,
            architecture=lambda_.Architecture.ARM_64,
            handler="auto_stop.handler",
            code=lambda_.Code.from_asset(
                str(code_path), exclude=["*", *(f"!{name}" for name in HANDLER_FILES)]
            ),
            role=self.role,
            timeout=Duration.seconds(60),  # worst case: 5 throttled attempts with backoff, per call
            memory_size=256,
            environment=environment,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            retry_attempts=2,  # asynchronous invocation: 2 retries, then the dead-letter queue
            max_event_age=Duration.hours(1),
            # an on-failure destination rather than a function DLQ: its record carries the error as well
            # as the event (cdk-nag Serverless-LambdaAsyncFailureDestination)
            on_failure=destinations.SqsDestination(self.dead_letter_queue),
        )
        self.topic.grant_publish(self.function)

        self.rule = events.Rule(
            self,
            "Rule",
            description="SageMaker Debugger rule reported IssuesFound on an InProgress training job",
            event_pattern=events.EventPattern(
                source=self.event_pattern["source"],
                detail_type=self.event_pattern["detail-type"],
                detail=self.event_pattern["detail"],
            ),
        )
        self.rule.add_target(
            targets.LambdaFunction(
                self.function,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=4,
                max_event_age=Duration.hours(2),
            )
        )
        self.errors_alarm = cloudwatch.Alarm(
            self,
            "ErrorsAlarm",
            alarm_description=(
                "Debugger auto-stop failed: the function raised (throttled or denied by SageMaker after "
                "retries, a malformed event, an invalid AUTO_STOP_* environment). Its log group has the "
                "JSON decision line; Lambda retries, then the event goes to the dead-letter queue."
            ),
            metric=self.function.metric_errors(period=Duration.minutes(1), statistic="Sum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.dead_letter_alarm = cloudwatch.Alarm(
            self,
            "DeadLetterAlarm",
            alarm_description=(
                "Debugger auto-stop dropped an event: it is in the dead-letter queue (EventBridge could not "
                "deliver it, or the function failed it after its retries). The job it names was not stopped."
            ),
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=Duration.minutes(5), statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        notify = cloudwatch_actions.SnsAction(self.topic)
        for alarm in (self.errors_alarm, self.dead_letter_alarm):
            alarm.add_alarm_action(notify)
            alarm.add_ok_action(notify)
        _acknowledge(self, job_patterns=job_patterns)


def event_pattern(
    *, job_name_prefix: str = "", rule_names: Sequence[str] = (), profiler_rules_can_stop: bool = False
) -> dict[str, Any]:
    """The EventBridge pattern: an allowed rule at IssuesFound on an InProgress job.

    An object pattern under an array field matches when one element matches, so the rule name and
    status are checked on the same status entry. The handler re-checks everything; the pattern only
    keeps Lambda from running for the other state changes.
    """
    status: dict[str, Any] = {"RuleEvaluationStatus": ["IssuesFound"]}
    if rule_names:
        status = {"RuleConfigurationName": list(rule_names), **status}
    detail: dict[str, Any] = {"TrainingJobStatus": ["InProgress"]}
    if job_name_prefix:
        detail["TrainingJobName"] = [{"prefix": job_name_prefix}]
    if profiler_rules_can_stop:
        detail["$or"] = [
            {"DebugRuleEvaluationStatuses": status},
            {"ProfilerRuleEvaluationStatuses": dict(status)},
        ]
    else:
        detail["DebugRuleEvaluationStatuses"] = status
    return {
        "source": ["aws.sagemaker"],
        "detail-type": ["SageMaker Training Job State Change"],
        "detail": detail,
    }


def _validate(
    prefix: str, opt_in_tag: str, rule_names: Sequence[str], emails: Sequence[str], code_path: Path
) -> None:
    problems = []
    if not prefix and not opt_in_tag:
        problems.append(
            "no scope: without job_name_prefix or opt_in_tag every training job in the account and region "
            "could be stopped; pass job_name_prefix (e.g. 'mnist-'; --context job_prefix=mnist-) and/or "
            "opt_in_tag (e.g. 'sdk-ext:auto-stop'; --context opt_in_tag=sdk-ext:auto-stop, then tag each "
            "job that may be stopped with sdk-ext:auto-stop=true)"
        )
    if opt_in_tag and not _TAG_KEY.fullmatch(opt_in_tag):
        problems.append(
            f"opt_in_tag={opt_in_tag!r}: a tag key is 1-128 letters, digits, spaces or _.:/=+-@, not starting "
            "with aws:"
        )
    if prefix and not _PREFIX.fullmatch(prefix):
        problems.append(
            f"job_name_prefix={prefix!r}: use 1-63 of [a-zA-Z0-9-], starting with a letter or digit"
        )
    problems += [
        f"rule name {n!r}: use 1-256 characters without commas"
        for n in rule_names
        if not _RULE_NAME.fullmatch(n)
    ]
    problems += [f"notification email {e!r}: not an email address" for e in emails if not _EMAIL.fullmatch(e)]
    missing = [name for name in HANDLER_FILES if not (code_path / name).is_file()]
    if missing:
        problems.append(f"code_path={str(code_path)!r}: missing {', '.join(missing)}")
    if problems:
        raise ValueError("AutoStop: " + "; ".join(problems))


def _acknowledge(scope: Construct, *, job_patterns: Sequence[str]) -> None:
    """cdk-nag AwsSolutions findings this design accepts, each with its reason."""
    arn = "arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/"
    reasons = {
        f"AwsSolutions-IAM5[Resource::{arn}{pattern}]": (
            "The function stops whichever training job the event names; job names are not known at deploy "
            "time, so the resource is every training job under the configured name prefix (with an opt-in "
            "tag, StopTrainingJob is further limited to jobs carrying it), for only "
            "sagemaker:DescribeTrainingJob, sagemaker:ListTags (with a tag) and sagemaker:StopTrainingJob."
        )
        for pattern in job_patterns
    }
    reasons |= {
        "AwsSolutions-L1": (
            "Python 3.13 is the runtime this function is written and tested for; moving to a newer "
            "runtime is a deliberate, tested upgrade, not something a new CDK release should do at synth."
        ),
    }
    reasons["AwsSolutions-SQS3"] = (
        "This queue is the dead-letter queue: the EventBridge target's DeadLetterConfig and the function's "
        "on-failure destination; cdk-nag recognizes only a function DLQ or an SQS redrive as DLQ use."
    )
    reasons["AwsSolutions-IAM5[Action::kms:GenerateDataKey*]"] = (
        "Publishing to a topic encrypted with a customer-managed key needs kms:GenerateDataKey* and "
        "kms:Decrypt (SNS documentation; Topic.grant_publish); granted on that one key only."
    )
    for rule_id, reason in reasons.items():
        Validations.of(scope).acknowledge(Acknowledgment(id=f"AwsSolutions::{rule_id}", reason=reason))
