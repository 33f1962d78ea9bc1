"""A custom rule's local source file is uploaded to S3 (moto's server, real HTTP) before the job is sent."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from sdk_ext.debugger import DebuggerConfigError, ProfilerRule, Rule, S3RuleSourceUploader, apply_debugger
from sdk_ext.exceptions import StorageError

REQUEST = {"TrainingJobName": "job-1", "OutputDataConfig": {"S3OutputPath": "s3://job-bucket/runs/"},
           "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}}


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_ENDPOINT_URL_S3", endpoint)):
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = boto3.client("s3", region_name="us-east-1")
    bucket = f"job-bucket-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    client.test_bucket = bucket
    return client


@pytest.fixture
def rule_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_custom_rule.py"
    path.write_text("from sdk_ext.rules import Rule\n\n\nclass CustomGradientRule(Rule):\n    pass\n")
    return path


def test_default_uploader_puts_the_source_next_to_the_job_output(s3: Any, rule_file: Path) -> None:
    request = {**REQUEST, "OutputDataConfig": {"S3OutputPath": f"s3://{s3.test_bucket}/runs/"}}
    rule = Rule.custom("CustomGradientRule", "img:1", "ml.t3.medium", 30, source=str(rule_file),
                       rule_to_invoke="CustomGradientRule", rule_parameters={"threshold": "20.0"})
    out = apply_debugger(request, rules=[rule], region="us-west-2")  # default uploader: boto3 S3 client

    params = out["DebugRuleConfigurations"][0]["RuleParameters"]
    uri = params["source_s3_uri"]
    prefix = f"s3://{s3.test_bucket}/runs/CustomGradientRule/"
    assert uri.startswith(prefix) and uri.endswith("/my_custom_rule.py")
    uuid.UUID(uri[len(prefix):].split("/")[0])  # a fresh uuid per upload
    assert list(params) == ["source_s3_uri", "rule_to_invoke", "threshold"]
    body = s3.get_object(Bucket=s3.test_bucket, Key=uri.split("/", 3)[3])["Body"].read()
    assert body == rule_file.read_bytes()
    assert rule.rule_parameters["source_s3_uri"] == str(rule_file)  # the rule object is unchanged


def test_configured_bucket_and_profiler_rule_source(s3: Any, rule_file: Path) -> None:
    fixed = uuid.UUID("00000000-0000-4000-8000-000000000000")
    uploader = S3RuleSourceUploader(client=s3, bucket=s3.test_bucket, prefix="team/rules", uuid_factory=lambda: fixed)
    rule = ProfilerRule.custom("MyProf", "img:1", "ml.m5.xlarge", 10, source=f"file://{rule_file}",
                               rule_to_invoke="MyProf", rule_parameters={"limit": 3})
    out = apply_debugger(REQUEST, rules=[rule], region="us-west-2", uploader=uploader)
    assert out["ProfilerRuleConfigurations"][0]["RuleParameters"] == {
        "source_s3_uri": f"s3://{s3.test_bucket}/team/rules/MyProf/{fixed}/my_custom_rule.py",
        "rule_to_invoke": "MyProf", "limit": "3"}


def test_a_failed_upload_raises_instead_of_sending_a_job_without_its_rule(s3: Any, rule_file: Path) -> None:
    uploader = S3RuleSourceUploader(client=s3, bucket="no-such-bucket")
    rule = Rule.custom("R", "img:1", "ml.m5.xlarge", 10, source=str(rule_file), rule_to_invoke="R")
    with pytest.raises(StorageError, match="uploading rule source .*my_custom_rule.py.* to s3://no-such-bucket/R/"):
        apply_debugger(REQUEST, rules=[rule], region="us-west-2", uploader=uploader)


def test_a_source_url_that_is_neither_s3_nor_local_is_an_error(rule_file: Path) -> None:
    rule = Rule.custom("R", "img:1", "ml.m5.xlarge", 10, source="https://example.com/r.py", rule_to_invoke="R")
    with pytest.raises(DebuggerConfigError, match="neither an s3:// URI nor a local file"):
        apply_debugger(REQUEST, rules=[rule], region="us-west-2")


def test_a_file_uri_with_an_escaped_space_uploads_the_file_it_names(s3: Any, tmp_path: Path) -> None:
    folder = tmp_path / "my rules"
    folder.mkdir()
    path = folder / "gradient rule.py"
    path.write_text("from sdk_ext.rules import Rule\n")
    fixed = uuid.UUID("00000000-0000-4000-8000-000000000001")
    uploader = S3RuleSourceUploader(client=s3, bucket=s3.test_bucket, uuid_factory=lambda: fixed)
    rule = Rule.custom("R", "img:1", "ml.m5.xlarge", 10, source=path.as_uri(), rule_to_invoke="R")
    assert "%20" in path.as_uri()
    out = apply_debugger(REQUEST, rules=[rule], region="us-west-2", uploader=uploader)
    uri = out["DebugRuleConfigurations"][0]["RuleParameters"]["source_s3_uri"]
    assert uri == f"s3://{s3.test_bucket}/R/{fixed}/gradient rule.py"
    assert s3.get_object(Bucket=s3.test_bucket, Key=uri.split("/", 3)[3])["Body"].read() == path.read_bytes()


def test_a_file_uri_naming_another_host_is_refused(tmp_path: Path) -> None:
    rule = Rule.custom("R", "img:1", "ml.m5.xlarge", 10, source="file://server/share/rule.py", rule_to_invoke="R")
    with pytest.raises(DebuggerConfigError, match="rule 'R': rule source .* names host 'server'.*three slashes"):
        apply_debugger(REQUEST, rules=[rule], region="us-west-2", uploader=S3RuleSourceUploader(bucket="b"))
