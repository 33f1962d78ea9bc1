"""A job tagged by ``apply_debugger``/``attach(auto_stop_opt_in_tag=...)`` is one the auto-stop function stops.

The request is built by sdk_ext.debugger (for ``attach``: exactly what botocore would send, captured at
``before-send``), its Tags are then what SageMaker's ListTags returns for the job, and the deployed
function's own code (lambda/auto_stop.py under botocore's Stubber) decides. Without the keyword the
request is unchanged, so the same function leaves the job alone.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from auto_stop import AutoStopConfig, process_event
from auto_stop_policy import OPT_IN_VALUE, TAG_KEY, ConfigError, opted_in
from botocore.stub import Stubber

from sdk_ext.debugger import DebuggerConfigError, Rule, apply_debugger, attach, rule_configs
from sdk_ext.debugger.apply import AUTO_STOP_OPT_IN_VALUE
from tests.sagemaker_events import JOB, captured_event, describe_response
from tests.unit.debugger.botocapture import BotoCapture

TAG = "sdk-ext:auto-stop"
REGION = "us-east-1"
ARN = f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{JOB}"
RULES = [Rule.sagemaker(rule_configs.vanishing_gradient())]


def _request(**extra: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": JOB,
        "AlgorithmSpecification": {"TrainingInputMode": "File",
                                   "TrainingImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1"},
        "RoleArn": "arn:aws:iam::123456789012:role/SageMakerRole",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        **extra,
    }


@pytest.fixture
def sagemaker() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("sagemaker", region_name=REGION, aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


def _auto_stop(sagemaker: tuple[Any, Stubber], job_tags: list[dict[str, str]], *, stops: bool) -> dict[str, Any]:
    """Run the deployed function's code (opt_in_tag=TAG) on the captured event for a job with ``job_tags``."""
    client, stub = sagemaker
    stub.add_response("describe_training_job", {**describe_response(captured_event()), "TrainingJobArn": ARN},
                      {"TrainingJobName": JOB})
    stub.add_response("list_tags", {"Tags": job_tags}, {"ResourceArn": ARN})
    if stops:
        stub.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    return process_event(captured_event(), sagemaker=client, config=AutoStopConfig(opt_in_tag=TAG),
                         sleep=lambda _: None)


def test_a_request_tagged_by_apply_debugger_is_stopped_by_the_function(sagemaker):
    request = apply_debugger(_request(), rules=RULES, region=REGION, auto_stop_opt_in_tag=TAG)
    assert request["Tags"] == [{"Key": TAG, "Value": "true"}]
    assert opted_in(request["Tags"], TAG)
    result = _auto_stop(sagemaker, request["Tags"], stops=True)
    assert (result["action"], result["stopped"]) == ("stopped", True)


def test_without_the_keyword_nothing_is_tagged_and_the_function_leaves_the_job_alone(sagemaker):
    plain = apply_debugger(_request(), rules=RULES, region=REGION)
    assert "Tags" not in plain
    tagged = apply_debugger(_request(), rules=RULES, region=REGION, auto_stop_opt_in_tag=TAG)
    assert {k: v for k, v in tagged.items() if k != "Tags"} == plain  # the tag is the only difference
    result = _auto_stop(sagemaker, plain.get("Tags", []), stops=False)
    assert (result["action"], result["stopped"]) == ("ignored", False)


def test_a_job_tagged_through_attach_is_stopped_by_the_function(sagemaker):
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    capture = BotoCapture({"CreateTrainingJob": {"TrainingJobArn": ARN}}).install(session.events)
    with attach(session, rules=RULES, auto_stop_opt_in_tag=TAG):
        session.client("sagemaker").create_training_job(**_request(Tags=[{"Key": "team", "Value": "vision"}]))
    [sent] = capture.bodies("CreateTrainingJob")  # what botocore validated and would send
    assert sent["Tags"] == [{"Key": "team", "Value": "vision"}, {"Key": TAG, "Value": "true"}]
    assert _auto_stop(sagemaker, sent["Tags"], stops=True)["stopped"] is True


def test_existing_tags_are_merged_in_place_and_not_modified():
    given = _request(Tags=[{"Key": "team", "Value": "vision"}], HyperParameters={"epochs": "3"})
    before = copy.deepcopy(given)
    request = apply_debugger(given, rules=RULES, region=REGION, auto_stop_opt_in_tag=TAG)
    assert given == before
    assert request["Tags"] == [{"Key": "team", "Value": "vision"}, {"Key": TAG, "Value": "true"}]
    keys = list(request)
    assert keys.index("Tags") < keys.index("HyperParameters")  # where the request had it


def test_the_tag_already_set_to_true_is_not_added_twice():
    tags = [{"Key": TAG, "Value": "true"}, {"Key": "team", "Value": "vision"}]
    request = apply_debugger(_request(Tags=tags), rules=RULES, region=REGION, auto_stop_opt_in_tag=TAG)
    assert request["Tags"] == tags


@pytest.mark.parametrize("value", ["false", "True", ""])
def test_the_same_key_with_another_value_is_an_error_naming_it(value):
    with pytest.raises(DebuggerConfigError, match=rf"request Tags already has '{TAG}' with the value '{value}'"):
        apply_debugger(_request(Tags=[{"Key": TAG, "Value": value}]), rules=RULES, region=REGION,
                       auto_stop_opt_in_tag=TAG)


def test_too_many_tags_is_an_error():
    tags = [{"Key": f"k{i}", "Value": "v"} for i in range(50)]
    with pytest.raises(DebuggerConfigError, match="makes 51 tags; a training job has at most 50"):
        apply_debugger(_request(Tags=tags), rules=RULES, region=REGION, auto_stop_opt_in_tag=TAG)


@pytest.mark.parametrize("key", ["", "aws:auto-stop", "a" * 129, "auto#stop", 7])
def test_a_key_the_deployment_would_refuse_is_refused(key):
    """The keys the function refuses as AUTO_STOP_OPT_IN_TAG are refused here too, before anything is sent."""
    if isinstance(key, str) and key:
        with pytest.raises(ConfigError):
            AutoStopConfig.from_env({"AUTO_STOP_OPT_IN_TAG": key})
    with pytest.raises(DebuggerConfigError, match="auto_stop_opt_in_tag must be a tag key"):
        apply_debugger(_request(), rules=RULES, region=REGION, auto_stop_opt_in_tag=key)
    with pytest.raises(DebuggerConfigError, match="auto_stop_opt_in_tag must be a tag key"):
        attach(boto3.Session(region_name=REGION), rules=RULES, auto_stop_opt_in_tag=key)


@pytest.mark.parametrize("key", [TAG, "team/auto stop", "x", "Stop_Me=+@.", "a" * 128])
def test_every_key_the_deployment_accepts_is_accepted(key):
    assert TAG_KEY.fullmatch(key)
    request = apply_debugger(_request(), rules=RULES, region=REGION, auto_stop_opt_in_tag=key)
    assert opted_in(request["Tags"], key)


def test_the_tag_value_is_the_functions():
    assert AUTO_STOP_OPT_IN_VALUE == OPT_IN_VALUE
