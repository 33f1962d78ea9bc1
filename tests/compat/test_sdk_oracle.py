"""Replays every case of shared/fixtures/sdk/oracle_public.json (SageMaker SDK 2.257.7's real output).

Unit cases build the objects and compare their request dicts, attributes and errors. Estimator cases
run apply_debugger on the job's CreateTrainingJob request (the SDK's request minus the five Debugger
keys) and compare the whole request, the artifact paths, rule statuses and UpdateTrainingJob requests.

Where sdk_ext differs from the SDK on purpose (README.md#debugger-for-a-training-job-sagemaker-sdk-v3-v2-or-boto3), the case asserts sdk_ext's behaviour and
names the difference; each difference also has its own test in tests/unit/debugger.
Errors: the exception must be an instance of the SDK's type; messages written by sdk_ext must state
the same facts (table below), messages from smdebug-rulesconfig itself must be identical.
"""

from __future__ import annotations

import builtins
import copy
import json
import re
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from sdk_ext import debugger as dbg
from sdk_ext.debugger import DEBUGGER_KEYS, DebuggerConfigError
from tests.compat.sdk_specs import Specs
from tests.conftest import FIXTURES

ORACLE_PATH = FIXTURES / "sdk" / "oracle_public.json"
ORACLE: list[dict[str, Any]] = json.loads(ORACLE_PATH.read_text()) if ORACLE_PATH.is_file() else []
CASES = [c for c in ORACLE if c.get("kind") in ("unit", "estimator")]
ACCOUNT = "123456789012"
FIXED_UUID = uuid.UUID("00000000-0000-4000-8000-000000000000")
FIXED_NOW = datetime(2000, 1, 1, tzinfo=timezone.utc)


def _words(*fixed: str) -> Callable[[re.Match[str]], list[str]]:
    return lambda m: list(fixed)


# SDK message -> facts sdk_ext's message must contain besides the SDK's own text (lowercase comparison):
# what was wrong, where, how to fix it.
SDK_ERROR_FACTS: list[tuple[str, Callable[[re.Match[str]], list[str]]]] = [
    (r"You cannot provide a 'rule_to_invoke' for SageMaker rules\..*", _words("rule_to_invoke", "Rule.custom")),
    (r"`actions` must be of type `Action` or `ActionList`!", _words("pass an action", "ActionList")),
    (r"If you provide a source, you must also provide a rule to invoke \(and vice versa\)\.",
     _words("source", "rule_to_invoke", "needs both")),
    (r"Rules list can only contain sagemaker\.debugger\.Rule and sagemaker\.debugger\.ProfilerRule",
     _words("rules[", "sdk_ext.debugger Rule and ProfilerRule")),
    (r"Current region does not support debugger but debugger hook config is set!",
     _words("does not support SageMaker Debugger", "hook config is set")),
    (r"Unsupported region: (\S+)\. .* Supported region\(s\): (.*)\.",
     lambda m: [f"region {m.group(1)!r}", *m.group(2).split(", ")]),
    (r"profiler_config\.disable_profiler cannot be False when disable_profiler is True\.",
     _words("profiler_config enables the profiler, but it is off")),
    (r"ProfilerRule cannot be set when disable_profiler is True\.", _words("profiler rules", "profiler is off")),
    (r"Profiler will not work when Framework Profiler is ON", _words("profile_params", "framework_profile_params",
                                                                     "both set; keep one")),
    (r"framework_profile_params must be of type FrameworkProfile if specified\.",
     _words("pass FrameworkProfile(...)")),
    (r"profile_params must be of type Profiler if specified\.", _words("pass Profiler(...)")),
    (r"local_path must be a string!", _words("got", "give the directory")),
    (r"file_max_size must be an integer greater than 0!", _words("got", "give the bytes")),
    (r"file_close_interval must be a float/integer greater than 0!", _words("got", "give the seconds")),
    (r"file_open_fail threshold must be an integer greater than 0!", _words("got", "whole number of attempts")),
    (r"profile_default_steps must be a boolean!", _words("got", "pass true or false")),
    (r"start_step must be integer greater or equal to 0!", _words("got", "first step to profile")),
    (r"num_steps must be integer greater than 0!", _words("got", "how many steps")),
    (r"start_unix_time must be valid integer unix time!", _words("got", "seconds since 1970")),
    (r"duration must be float greater than 0!", _words("got", "seconds to profile")),
    (r"Both step and time fields cannot be specified in the metrics config!", _words("step range", "time range",
                                                                                       "keep one")),
    (r"metrics_regex is invalid!", _words("got", "not a regular expression")),
    (r"python_profiler must be of type PythonProfiler!", _words("got", "PythonProfiler.CPROFILE")),
    (r"cprofile_timer must be of type cProfileTimer", _words("got", "cProfileTimer.TOTAL_TIME")),
    (r"Current region does not support profiler / debugger!", _words("does not support SageMaker Debugger")),
    (r"Debugger monitoring is already enabled\..*", _words("already enabled")),
    (r"Profiler is already disabled\.", _words("already disabled")),
    (r"Please provide profiler config or profiler rule to be updated\.", _words("nothing to update")),
    (r"framework_profile_params cannot be set when disable_framework_metrics is True",
     _words("pass one of the two")),
    (r"Please provide ProfilerRule to be updated\.", _words("only ProfilerRule objects")),
]


# Upgrading the sagemaker package adds no region to sdk_ext's image table, so sdk_ext leaves this sentence out.
_WRONG_ADVICE = "You may need to upgrade your SDK version (pip install -U sagemaker) for newer regions."


def assert_same_error(err: BaseException, expected: dict[str, str]) -> None:
    sdk_type, sdk_message = getattr(builtins, expected["type"]), expected["message"]
    assert isinstance(err, sdk_type), f"SDK raised {expected['type']}, sdk_ext raised {type(err).__name__}: {err}"
    if not isinstance(err, DebuggerConfigError):  # raised by smdebug-rulesconfig, the same library as the SDK's
        assert str(err) == sdk_message
        return
    sdk_text = " ".join(sdk_message.split())  # the rule_to_invoke message is a triple-quoted, indented string
    ours_text = " ".join(str(err).split())
    for part in sdk_text.split(_WRONG_ADVICE):  # the SDK's text, but for advice that does not apply to sdk_ext
        assert part.strip() in ours_text, f"sdk_ext's message lacks the SDK's text {part!r}:\n{err}"
    ours = str(err).lower()
    for pattern, facts in SDK_ERROR_FACTS:
        match = re.fullmatch(pattern, sdk_message, re.DOTALL)
        if match:
            missing = [f for f in facts(match) if f.lower() not in ours]
            assert not missing, f"sdk_ext's message lacks {missing}:\n{err}\nSDK said: {sdk_message}"
            return
    pytest.fail(f"no fact table entry for the SDK message {sdk_message!r} (sdk_ext said: {err})")


def normalized(request: dict[str, Any]) -> dict[str, Any]:
    """Estimator-level collections sorted as the oracle sorts them (the SDK's order was a set's)."""
    out = copy.deepcopy(request)
    hook = out.get("DebugHookConfig")
    if hook and hook.get("CollectionConfigurations") is not None:
        hook["CollectionConfigurations"].sort(
            key=lambda c: (c["CollectionName"], json.dumps(c.get("CollectionParameters"), sort_keys=True)))
    return out


def _has_non_string_debugger_rule_parameter(specs: list[Any]) -> bool:
    return any(s.get("kind", "").startswith("Rule.") and any(not isinstance(v, str) for v in
               (s.get("rule_parameters") or {}).values()) for s in specs if isinstance(s, dict))


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def specs(tmp_path: Path) -> Specs:
    rule_file = tmp_path / "my_custom_rule.py"
    rule_file.write_text("from sdk_ext.rules import Rule\n\nclass MyCustomRule(Rule):\n    pass\n")
    return Specs(rule_file)


def _check_unit(case: dict[str, Any], specs: Specs) -> list[str]:
    """Returns the deliberate differences this case showed."""
    inputs, expected = case["inputs"], case["expected"]
    if inputs["build"] == "Rule" and "error" not in expected and _has_non_string_debugger_rule_parameter(
            [inputs["spec"]]):
        with pytest.raises(DebuggerConfigError, match="must be a string"):
            specs.build_unit(inputs["build"], inputs["spec"])
        return ["non-string debugger rule parameter rejected before sending"]
    if "error" in expected:
        with pytest.raises(Exception) as info:
            specs.build_unit(inputs["build"], inputs["spec"])
        assert_same_error(info.value, expected["error"])
        return []
    obj = specs.build_unit(inputs["build"], inputs["spec"])
    for key, want in expected.items():
        if key == "_to_request_dict":
            assert obj._to_request_dict() == want
        elif key == "to_debugger_rule_config_dict":
            assert json.dumps(obj.to_debugger_rule_config_dict()) == json.dumps(want)
        elif key == "to_profiler_rule_config_dict":
            assert json.dumps(obj.to_profiler_rule_config_dict()) == json.dumps(want)
        elif key == "attributes":
            for attr, value in want.items():
                if attr == "collection_configs":
                    assert [c._to_request_dict() for c in obj.collection_configs] == value
                elif attr == "rule_parameters_before_request":
                    assert obj.rule_parameters == value
                else:
                    assert getattr(obj, attr) == value, attr
        elif key == "rule_evaluator_image_for_region":
            assert dbg.get_rule_container_image_uri(obj.name, inputs["region"]) == want
        elif key == "after_prepare_actions":
            prepared = obj.prepare_actions(inputs["prepare_actions_job_name"])
            if "RuleConfigurationName" in want:
                assert prepared.to_debugger_rule_config_dict() == want
            else:
                assert prepared.rule_parameters == want.get("rule_parameters", want)
        elif key == "base_config" or key == "uri":
            assert obj == want
        elif key in ("name", "rule_name", "rule_parameters", "profiling_parameters"):
            assert getattr(obj, key) == want
        elif key == "to_json_string":
            assert obj.to_json_string() == want
        else:
            pytest.fail(f"unit expectation {key!r} is not checked by this harness")
    return []


class _World:
    """The oracle's fixed world for one estimator case, and the apply_debugger arguments it means."""

    def __init__(self, case: dict[str, Any], specs: Specs, s3_endpoint: str) -> None:
        self.inputs = inputs = case["inputs"]
        self.expected = case["expected"]
        self.specs = specs
        self.region = inputs.get("region", "us-west-2")
        self.estimator = inputs.get("estimator") or {}
        self.bucket = f"sagemaker-{self.region}-{ACCOUNT}"
        self.prefix = inputs.get("default_bucket_prefix")
        default_output = "s3://" + "/".join([self.bucket, *([self.prefix] if self.prefix else [])]) + "/"
        self.output_path = self.estimator.get("output_path") or default_output
        self.job_name = (inputs.get("fit") or {}).get("job_name", "debugger-oracle-job")
        self.s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1",
                               aws_access_key_id="testing", aws_secret_access_key="testing")
        self.sdk_config = inputs.get("sagemaker_config") or {}

    def base_request(self) -> dict[str, Any]:
        full = self.expected.get("create_training_job_request")
        if full is not None:
            return {k: v for k, v in full.items() if k not in DEBUGGER_KEYS}
        est = self.estimator
        request: dict[str, Any] = {
            "TrainingJobName": self.job_name, "OutputDataConfig": {"S3OutputPath": self.output_path},
            "ResourceConfig": {"VolumeSizeInGB": 30, "InstanceCount": est.get("instance_count", 1),
                               "InstanceType": est.get("instance_type", "ml.m5.xlarge")}}
        if est.get("checkpoint_s3_uri"):
            request["CheckpointConfig"] = {"S3Uri": est["checkpoint_s3_uri"],
                                           "LocalPath": est.get("checkpoint_local_path")}
        return request

    def sdk_dropped_hook_for_single_instance_checkpoint(self) -> bool:
        est = self.estimator
        return (est.get("type") in ("PyTorch", "TensorFlow", "MXNet") and bool(est.get("checkpoint_s3_uri"))
                and bool(est.get("checkpoint_local_path")) and est.get("instance_count", 1) == 1
                and self.inputs.get("debugger_hook_config", True) is not False
                and self.region not in dbg.images.DEBUGGER_UNSUPPORTED_REGIONS
                and "DebugHookConfig" not in self.expected.get("create_training_job_request", {"DebugHookConfig": 1}))

    def _sdk_config(self, *path: str) -> Any:
        node: Any = self.sdk_config
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    def arguments(self) -> dict[str, Any]:
        """apply_debugger's keywords. The SDK defaults file is resolved here, as the v2 Session did
        before its Debugger logic ran; sdk_ext reads no SDK config file."""
        inputs, specs = self.inputs, self.specs
        framework = {"PyTorch": "pytorch", "TensorFlow": "tensorflow"}.get(self.estimator.get("type"))
        hook = specs.hook(inputs["debugger_hook_config"]) if "debugger_hook_config" in inputs else None
        if hook is None:
            hook = self._sdk_config("SageMaker", "PythonSDK", "Modules", "Estimator", "DebugHookConfig")
        direct = inputs.get("disable_profiler", False if framework is None else None)
        disable = direct if direct is not None else bool(
            self._sdk_config("SageMaker", "TrainingJob", "ProfilerConfig", "DisableProfiler"))
        rules = inputs.get("rules")
        return {
            "debugger_hook_config": hook, "disable_profiler": disable, "region": self.region, "framework": framework,
            "rules": None if rules is None else [specs.rule(r) for r in rules],
            "tensorboard_output_config": (specs.tensorboard(inputs["tensorboard_output_config"])
                                          if inputs.get("tensorboard_output_config") else None),
            "profiler_config": (specs.profiler_config(inputs["profiler_config"])
                                if inputs.get("profiler_config") is not None else None),
            "uploader": self.uploader(), "now": lambda: FIXED_NOW}

    def uploader(self) -> dbg.S3RuleSourceUploader:
        """Uploads to the session's default bucket, as the SDK did (moto server, real HTTP)."""
        self.s3.create_bucket(Bucket=self.bucket)
        return dbg.S3RuleSourceUploader(client=self.s3, bucket=self.bucket, prefix=self.prefix,
                                        uuid_factory=lambda: FIXED_UUID)

    def apply(self) -> dict[str, Any]:
        result = dbg.apply_debugger(self.base_request(), **self.arguments())
        defaults = self._sdk_config("SageMaker", "TrainingJob", "ProfilerConfig") or {}
        for key, value in defaults.items():  # the v2 Session fills unset ProfilerConfig keys from its config
            result["ProfilerConfig"].setdefault(key, value)
        return result


def _check_estimator(case: dict[str, Any], specs: Specs, s3_endpoint: str) -> list[str]:
    """Returns the deliberate differences this case showed."""
    world, expected, differences = _World(case, specs, s3_endpoint), case["expected"], []
    if "error" in expected:
        with pytest.raises(Exception) as info:
            world.apply()
        assert_same_error(info.value, expected["error"])
        return differences
    if _has_non_string_debugger_rule_parameter(world.inputs.get("rules") or []):
        with pytest.raises(DebuggerConfigError, match="must be a string"):
            world.apply()
        return ["non-string debugger rule parameter rejected before sending"]

    result = world.apply()
    want = expected["create_training_job_request"]
    kept_hook = None
    if world.sdk_dropped_hook_for_single_instance_checkpoint():
        # Deliberate: the SDK silently dropped the hook of a checkpointed single-instance job.
        kept_hook = result.pop("DebugHookConfig")
        hook_spec = world.inputs.get("debugger_hook_config")
        assert kept_hook["S3OutputPath"] == ((hook_spec or {}).get("s3_output_path") if isinstance(hook_spec, dict)
                                             else None) or world.output_path
        differences.append("checkpointed single-instance framework job keeps its hook")
    for key, value in expected["request_fragments"].items():
        assert normalized(result)[key] == normalized({key: value})[key], key
    for key in expected["absent_keys"]:
        assert key not in result, key
    assert normalized(result) == normalized(want)
    if not world.sdk_config:  # same bytes, key order included (a config-file merge reorders the SDK's)
        assert json.dumps(normalized(result)) == json.dumps(normalized(want))
    _check_uploads(world, result)

    describe = {**result, **({"DebugHookConfig": kept_hook} if kept_hook else {})}
    getters = {"latest_job_debugger_artifacts_path": dbg.debugger_artifacts_path,
               "latest_job_tensorboard_artifacts_path": dbg.tensorboard_artifacts_path,
               "latest_job_profiler_artifacts_path": dbg.profiler_artifacts_path}
    for name, value in expected["artifact_paths"].items():
        ours = getters[name](describe)
        if kept_hook is not None and name == "latest_job_debugger_artifacts_path":
            assert ours == f"{world.output_path}{world.job_name}/debug-output"
        elif isinstance(value, dict) and "error" in value:
            assert value["error"]["type"] == "AttributeError"
            assert ours is None  # deliberate: no path -> None, never a crash
            differences.append(f"{name}: None instead of AttributeError")
        else:
            assert ours == value, name
    if "rule_job_summary" in expected:
        assert dbg.rule_statuses(world.inputs["describe_response"]) == expected["rule_job_summary"]
    if "update_training_job_request" in expected:
        want_update = expected["update_training_job_request"]
        if "error" in want_update:
            with pytest.raises(Exception) as info:
                _update_request(world, result)
            assert_same_error(info.value, want_update["error"])
        else:
            assert _update_request(world, result) == want_update
    return differences


def _check_uploads(world: _World, result: dict[str, Any]) -> None:
    for rule in result.get("DebugRuleConfigurations", []) + result.get("ProfilerRuleConfigurations", []):
        uri = (rule.get("RuleParameters") or {}).get("source_s3_uri", "")
        if uri.startswith(f"s3://{world.bucket}/"):
            body = world.s3.get_object(Bucket=world.bucket, Key=uri.split("/", 3)[3])["Body"].read()
            assert body == world.specs.local_rule_file.read_bytes()


def _update_request(world: _World, result: dict[str, Any]) -> dict[str, Any]:
    update = world.inputs["update"]
    # The oracle's DescribeTrainingJob answer is exactly describe_response; the SDK fell back to the
    # estimator's output path, which a real response carries as OutputDataConfig.
    describe = {"TrainingJobName": result["TrainingJobName"], "OutputDataConfig": result["OutputDataConfig"],
                **(update.get("describe_response") or {})}
    kwargs = dict(update.get("kwargs") or {})
    if "rules" in kwargs:
        kwargs["rules"] = [world.specs.rule(r) for r in kwargs["rules"]]
    if isinstance(kwargs.get("framework_profile_params"), dict):
        kwargs["framework_profile_params"] = world.specs.framework_profile(kwargs["framework_profile_params"])
    builder = {"enable_default_profiling": dbg.enable_default_profiling_request,
               "disable_profiling": dbg.disable_profiling_request,
               "update_profiler": dbg.update_profiler_request}[update["method"]]
    return builder(describe, region=world.region, **kwargs)


DIFFERENCES_SEEN: dict[str, list[str]] = {}


def test_oracle_is_present_and_complete():
    assert CASES, f"oracle not found at {ORACLE_PATH}"
    assert len(CASES) == len(ORACLE) - 1


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_oracle_case(case: dict[str, Any], specs: Specs, s3_endpoint: str) -> None:
    check = _check_unit(case, specs) if case["kind"] == "unit" else _check_estimator(case, specs, s3_endpoint)
    DIFFERENCES_SEEN[case["name"]] = check
