"""The job directory, the entry point's environment, what a request runs, FailureReason, rule files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.jobs import deployment, layout, rule_jobs
from sdk_ext.local.jobs.entry import Command, failure_reason, resolve_command


def _request(**extra: object) -> dict:
    return {"TrainingJobName": "job-1",
            "HyperParameters": {"lr": "0.1", "epochs": "3", "name": '"resnet"', "sagemaker_program": '"train.py"'},
            "DebugHookConfig": {"S3OutputPath": "s3://b/d", "LocalPath": "/opt/ml/output/tensors",
                                "HookParameters": {"save_interval": "1"}},
            "TensorBoardOutputConfig": {"S3OutputPath": "s3://b/tb"},
            "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": "PLACEHOLDER", "S3DataDistributionType": "FullyReplicated"}}}],
            "Environment": {"MY_FLAG": "1"}, **extra}


def test_job_directory_is_shaped_like_opt_ml(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    request = _request()
    request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = data.as_uri()
    job = layout.JobDir(tmp_path / "job")
    channels = layout.prepare(job, request)
    config = job.root / "input" / "config"
    hook = json.loads((config / "debughookconfig.json").read_text())
    assert hook["LocalPath"] == str(job.root / "output" / "tensors")  # /opt/ml/... moved into the job dir
    assert hook["HookParameters"] == {"save_interval": "1"}
    assert json.loads((config / "hyperparameters.json").read_text())["lr"] == "0.1"
    assert json.loads((config / "tensorboardoutputconfig.json").read_text())["LocalPath"] == \
        str(job.root / "output" / "tensorboard")
    assert json.loads((config / "resourceconfig.json").read_text())["hosts"] == ["algo-1"]
    assert json.loads((config / "inputdataconfig.json").read_text())["train"]["TrainingInputMode"] == "File"
    assert channels["train"].resolve() == data.resolve()
    assert json.loads(job.request_json.read_text()) == request


def test_training_environment_is_sagemakers(tmp_path: Path) -> None:
    job = layout.JobDir(tmp_path / "job")
    request = _request(InputDataConfig=[])
    layout.prepare(job, request)
    env = layout.training_env(job, request, arn="arn:x", channels={"train": job.data / "train"},
                              entry_point="train.py", module_dir=tmp_path, user_args=["--lr", "0.1"],
                              base={"PATH": "/bin", "SMDEBUG_CONFIG_FILE_PATH": "/elsewhere"})
    assert env["TRAINING_JOB_NAME"] == "job-1" and env["TRAINING_JOB_ARN"] == "arn:x"
    assert env["SMDEBUG_CONFIG_FILE_PATH"] == str(job.config / "debughookconfig.json")
    assert env["TENSORBOARD_CONFIG_FILE_PATH"] == str(job.config / "tensorboardoutputconfig.json")
    assert env["SM_MODEL_DIR"] == str(job.model) and env["SM_CHANNEL_TRAIN"] == str(job.data / "train")
    assert json.loads(env["SM_HPS"]) == {"lr": 0.1, "epochs": 3, "name": "resnet"}  # decoded; no sagemaker_*
    assert env["SM_HP_EPOCHS"] == "3" and env["SM_HP_NAME"] == "resnet"
    assert json.loads(env["SM_CHANNELS"]) == ["train"] and json.loads(env["SM_HOSTS"]) == ["algo-1"]
    assert env["MY_FLAG"] == "1" and env["PATH"] == "/bin"


def test_a_job_without_a_hook_config_gets_no_hook_path(tmp_path: Path) -> None:
    job = layout.JobDir(tmp_path / "job")
    request = {"TrainingJobName": "job-1"}
    layout.prepare(job, request)
    env = layout.training_env(job, request, arn="a", channels={}, entry_point="t.py", module_dir=tmp_path,
                              user_args=[], base={"SMDEBUG_CONFIG_FILE_PATH": "/stale"})
    assert "SMDEBUG_CONFIG_FILE_PATH" not in env


def test_hyperparameters_become_arguments_as_the_training_toolkit_passes_them() -> None:
    args = layout.hyperparameter_args({"lr": "0.1", "name": '"resnet"', "layers": "[1, 2]", "plain": "a b",
                                       "sagemaker_program": '"train.py"'})
    assert args == ["--lr", "0.1", "--name", "resnet", "--layers", "[1, 2]", "--plain", "a b"]


def test_entry_point_from_sagemaker_program_and_submit_directory(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("")
    request = _request()
    request["HyperParameters"]["sagemaker_submit_directory"] = json.dumps(code.as_uri())
    command = resolve_command(request, layout.JobDir(tmp_path / "job"), python="py", entry_point=None,
                              script_args=["--extra"], zero_change=True)
    assert command.argv == ["py", "-m", "sdk_ext.pytorch.run", str(code / "train.py"), "--lr", "0.1",
                            "--epochs", "3", "--name", "resnet", "--extra"]
    assert command.cwd == code.resolve()


def test_entry_point_from_container_entrypoint(tmp_path: Path) -> None:
    request = {"TrainingJobName": "j", "AlgorithmSpecification": {
        "ContainerEntrypoint": ["bash", "-c"], "ContainerArguments": ["echo hi"]}}
    command = resolve_command(request, layout.JobDir(tmp_path), python="py", entry_point=None, script_args=(),
                              zero_change=False)
    assert command.argv == ["bash", "-c", "echo hi"]


def test_missing_entry_point_names_every_way_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sagemaker_program.*ContainerEntrypoint.*entry_point"):
        resolve_command({"TrainingJobName": "j"}, layout.JobDir(tmp_path), python="py", entry_point=None,
                        script_args=(), zero_change=False)
    with pytest.raises(ConfigError, match="needs a local directory"):
        resolve_command({"TrainingJobName": "j", "HyperParameters": {
            "sagemaker_program": "t.py", "sagemaker_submit_directory": "s3://b/code.tar.gz"}},
            layout.JobDir(tmp_path), python="py", entry_point=None, script_args=(), zero_change=False)


def test_failure_reason_names_the_error_line(tmp_path: Path) -> None:
    command = Command(["python", "train.py", "--lr", "1"], tmp_path, "train.py", [])
    tail = ("step 1\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
            "    raise ValueError('x')\nValueError: loss is nan at step 3\n")
    reason = failure_reason(1, command, layout.JobDir(tmp_path), tail)
    assert reason == ('AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "ValueError: loss is nan '
                      'at step 3"\nCommand "python train.py --lr 1", exit code: 1')
    killed = failure_reason(-9, command, layout.JobDir(tmp_path), "")
    assert "ExitCode -9 (killed by SIGKILL)" in killed
    unknown = failure_reason(-200, command, layout.JobDir(tmp_path), "")  # no signal has that number
    assert "ExitCode -200\n" in unknown and "killed by" not in unknown


def test_rule_processing_job_names_and_status_files(tmp_path: Path) -> None:
    name = rule_jobs.processing_job_name("a-very-long-training-job-name-2026", "VanishingGradientRuleConfig")
    job_part, rule_part, digest = name[:26], name[27:53], name[54:]
    assert job_part == "a-very-long-training-job-n" and rule_part == "vanishinggradientruleconfi"
    assert len(digest) == 8 and name == name.lower()
    path = tmp_path / "status.json"
    assert rule_jobs.read_status_file(path) is None
    path.write_text('{"RuleEvaluationStatus": "IssuesFou')  # torn: never taken for a status
    assert rule_jobs.read_status_file(path) is None
    path.write_text(json.dumps({"RuleEvaluationStatus": "IssuesFound", "StatusDetails": "Evaluation of the rule X "
                                "at step 42 resulted in the condition being met", "LastModifiedTime":
                                "2026-11-21T06:23:33.033000Z"}))
    status = rule_jobs.read_status_file(path)
    assert status is not None and status.step == 42 and status.modified is not None


def test_evaluator_gets_rule_parameters_verbatim_and_no_actions(tmp_path: Path) -> None:
    argv = rule_jobs.evaluator_argv(python="py", evaluator=["e.py"], trial_dir=Path("/t"),
                                    output_dir=Path("/o"), rule_configuration_name="LND",
                                    rule_parameters={"rule_to_invoke": "LossNotDecreasing", "num_steps": "3"},
                                    poll_interval=0.2)
    assert argv == ["py", "e.py", "--trial-dir", "/t", "--output-dir", "/o", "--rule-configuration-name", "LND",
                    "--poll-interval", "0.2", "--param", "rule_to_invoke=LossNotDecreasing", "--param", "num_steps=3"]
    env = rule_jobs.evaluator_env({"TRAINING_JOB_NAME": "j", "X": "1"}, "/repo")
    assert env == {"X": "1", "PYTHONPATH": "/repo", "SDK_EXT_RULE_ACTIONS": "0", "PYTHONUNBUFFERED": "1"}


def test_auto_stop_is_loaded_from_the_checkout_once() -> None:
    import auto_stop  # pytest puts lambda/ on sys.path; the loader must reuse that module, not a second copy

    assert deployment.load_auto_stop() is auto_stop


def test_missing_deployment_root_says_where_it_looked_and_how_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SDK_EXT_RULES_DIR", raising=False)
    monkeypatch.delenv("SDK_EXT_LAMBDA_DIR", raising=False)
    with pytest.raises(ConfigError, match=r"rules/evaluate.py not found \(tried .*nowhere/evaluate.py \(given\)\); "
                       r".*SDK_EXT_RULES_DIR"):
        deployment.evaluator_command(tmp_path / "nowhere")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "evaluate.py").write_text("")
    assert deployment.evaluator_command(tmp_path / "rules") == [str((tmp_path / "rules" / "evaluate.py").resolve())]
    monkeypatch.setenv("SDK_EXT_RULES_DIR", str(tmp_path / "rules"))
    assert deployment.evaluator_command() == [str((tmp_path / "rules" / "evaluate.py").resolve())]
    monkeypatch.delenv("SDK_EXT_RULES_DIR")
    assert deployment.evaluator_command() == ["-m", "sdk_ext.evaluator"]  # the package's own evaluator

    monkeypatch.setattr(deployment, "CHECKOUT", tmp_path)
    monkeypatch.setattr(deployment, "PACKAGED_LAMBDA", tmp_path / "site" / "sdk_ext" / "lambda_function")
    with pytest.raises(ConfigError, match=r"lambda/auto_stop.py not found \(tried .*lambda_function/auto_stop.py "
                       r"\(the installed sdk_ext\), .*/lambda/auto_stop.py \(the checkout .*SDK_EXT_LAMBDA_DIR"):
        deployment.lambda_dir()
    for where in (tmp_path / "lambda", deployment.PACKAGED_LAMBDA):  # the installed copy comes first
        where.mkdir(parents=True)
        (where / "auto_stop.py").write_text("")
        assert deployment.lambda_dir() == where.resolve()


def test_auto_stop_loads_without_lambda_on_sys_path(repo_env: dict[str, str]) -> None:
    import subprocess

    code = ("import sys; sys.path = [p for p in sys.path if not p.endswith('lambda')]\n"
            "from sdk_ext.local.jobs.deployment import load_auto_stop\n"
            "m = load_auto_stop(); print(m.process_event.__name__, 'auto_stop_policy' in sys.modules)")
    env = dict(repo_env)
    env["PYTHONPATH"] = str(deployment.SDK_EXT_PARENT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["process_event", "True"]
