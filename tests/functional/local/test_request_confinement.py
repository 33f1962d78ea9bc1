"""``sdk-ext run --request`` keeps every file of a job inside its job directory.

Each attack is a request SageMaker's API (or the job directory's confinement) refuses: the CLI exits
2 with a message naming the field, nothing is created outside the jobs directory (not even the job
directory), and no script runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sdk_ext.cli import main

Attack = Callable[[dict[str, Any], Path], None]


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} | {str(p.relative_to(root)) for p in root.glob("**/.*")}


def base_request(submit: Path) -> dict[str, Any]:
    return {
        "TrainingJobName": "confined",
        "AlgorithmSpecification": {"TrainingImage": "sdk-ext-local", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::000000000000:role/r",
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/output"},
        "ResourceConfig": {"InstanceType": "local", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "HyperParameters": {"sagemaker_program": json.dumps("train.py"),
                            "sagemaker_submit_directory": json.dumps(str(submit))},
        "DebugHookConfig": {"S3OutputPath": "s3://bucket/output", "LocalPath": "/opt/ml/output/tensors"},
    }


def channel(name: str, uri: str) -> dict[str, Any]:
    return {"ChannelName": name, "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri}}}


def rule(name: str) -> dict[str, Any]:
    return {"RuleConfigurationName": name, "RuleEvaluatorImage": "sdk-ext-local",
            "RuleParameters": {"rule_to_invoke": "LossNotDecreasing"}}


ATTACKS: dict[str, tuple[Attack, str]] = {
    "ChannelName ../../../../X": (
        lambda r, t: r.update(InputDataConfig=[channel("../../../../X", (t / "data").as_uri())]),
        "InputDataConfig[0].ChannelName '../../../../X'"),
    "ChannelName .. (SageMaker's pattern allows it)": (
        lambda r, t: r.update(InputDataConfig=[channel("..", (t / "data").as_uri())]),
        "InputDataConfig[0].ChannelName '..' resolves outside"),
    "file:///etc source under a traversing channel": (
        lambda r, t: r.update(InputDataConfig=[channel("../../../../etc-link", "file:///etc")]),
        "InputDataConfig[0].ChannelName '../../../../etc-link'"),
    "absolute ChannelName": (
        lambda r, t: r.update(InputDataConfig=[channel(str(t / "X"), (t / "data").as_uri())]),
        "InputDataConfig[0].ChannelName"),
    "RuleConfigurationName ../../../../X": (
        lambda r, t: r.update(DebugRuleConfigurations=[rule("../../../../X")]),
        "DebugRuleConfigurations[0].RuleConfigurationName '../../../../X' resolves outside"),
    "absolute RuleConfigurationName": (
        lambda r, t: r.update(DebugRuleConfigurations=[rule(str(t / "X"))]),
        "DebugRuleConfigurations[0].RuleConfigurationName"),
    "DebugHookConfig.LocalPath /opt/ml/../../../../X": (
        lambda r, t: r["DebugHookConfig"].update(LocalPath="/opt/ml/../../../../X"),
        "DebugHookConfig.LocalPath '/opt/ml/../../../../X' resolves outside the job directory"),
    "DebugHookConfig.LocalPath outside /opt/ml": (
        lambda r, t: r["DebugHookConfig"].update(LocalPath=str(t / "X")),
        "DebugHookConfig.LocalPath"),
    "DebugHookConfig.LocalPath relative": (
        lambda r, t: r["DebugHookConfig"].update(LocalPath="../X"),
        "DebugHookConfig.LocalPath '../X' resolves outside"),
    "TensorBoardOutputConfig.LocalPath /opt/ml/../X": (
        lambda r, t: r.update(TensorBoardOutputConfig={"S3OutputPath": "s3://b/tb", "LocalPath": "/opt/ml/../X"}),
        "TensorBoardOutputConfig.LocalPath '/opt/ml/../X' resolves outside"),
    "sagemaker_program ../../../x.py": (
        lambda r, t: r["HyperParameters"].update(sagemaker_program=json.dumps("../../../x.py")),
        "HyperParameters.sagemaker_program '../../../x.py' resolves outside its submit directory"),
    "sagemaker_program absolute": (
        lambda r, t: r["HyperParameters"].update(sagemaker_program=json.dumps(str(t / "x.py"))),
        "HyperParameters.sagemaker_program"),
    "sagemaker_program a symlink out of the submit directory": (
        lambda r, t: (t / "a" / "b" / "c" / "code" / "link.py").symlink_to(t / "x.py")
        or r["HyperParameters"].update(sagemaker_program=json.dumps("link.py")),
        "HyperParameters.sagemaker_program 'link.py' resolves outside"),
    "TrainingJobName ../X": (
        lambda r, t: r.update(TrainingJobName="../X"), "TrainingJobName '../X'"),
    "S3OutputPath not an S3 URI": (
        lambda r, t: r["DebugHookConfig"].update(S3OutputPath="/etc/passwd"), "DebugHookConfig.S3OutputPath"),
    "RuleConfigurationName with a line break": (
        lambda r, t: r.update(DebugRuleConfigurations=[rule("a\nb")]),
        "DebugRuleConfigurations[0].RuleConfigurationName"),
}


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(jobs dir deep inside tmp_path, submit dir); a sentinel script outside the submit directory."""
    jobs = tmp_path / "a" / "b" / "c" / "jobs"
    submit = tmp_path / "a" / "b" / "c" / "code"
    submit.mkdir(parents=True)
    (tmp_path / "data").mkdir()
    (submit / "train.py").write_text(f"open({str(tmp_path / 'train-ran')!r}, 'w').close()\n")
    (tmp_path / "x.py").write_text(f"open({str(tmp_path / 'x-ran')!r}, 'w').close()\n")
    return jobs, submit


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_attack_exits_2_naming_the_field_and_writes_nothing_outside(  # type: ignore[no-untyped-def]
    attack: str, layout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs, submit = layout
    make, field = ATTACKS[attack]
    req = base_request(submit)
    make(req, tmp_path)
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(req))
    before = files_under(tmp_path)

    code = main(["run", "--request", str(request_file), "--jobs-dir", str(jobs), "--no-auto-stop", "-q"])

    err = capsys.readouterr().err
    assert code == 2, err
    assert field in err, err
    assert files_under(tmp_path) == before  # nothing created anywhere: not outside, not even the job directory
    assert not (tmp_path / "x-ran").exists() and not (tmp_path / "train-ran").exists()


def test_every_problem_is_listed_in_one_message(layout, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    jobs, submit = layout
    req = base_request(submit)
    req["InputDataConfig"] = [channel("../X", "file:///etc")]
    req["Environment"] = {"1BAD": "x"}
    req["DebugHookConfig"]["HookParameters"] = {"save_interval": "1" * 300}
    (tmp_path / "request.json").write_text(json.dumps(req))
    assert main(["run", "--request", str(tmp_path / "request.json"), "--jobs-dir", str(jobs), "-q"]) == 2
    err = capsys.readouterr().err
    assert "3 problems" in err
    for field in ("InputDataConfig[0].ChannelName", "Environment key '1BAD'",
                  "DebugHookConfig.HookParameters['save_interval']"):
        assert field in err


def test_a_request_within_the_rules_still_runs(layout, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    jobs, submit = layout
    req = base_request(submit)
    req["InputDataConfig"] = [channel("train.v1-x_y", (tmp_path / "data").as_uri())]
    req["DebugHookConfig"]["LocalPath"] = "/opt/ml/output/../output/tensors"  # normalizes inside: fine
    (tmp_path / "request.json").write_text(json.dumps(req))
    code = main(["run", "--request", str(tmp_path / "request.json"), "--jobs-dir", str(jobs), "--no-auto-stop",
                 "-q", "--json"])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "train-ran").exists()
    job = jobs / "confined"
    assert os.path.realpath(job / "input" / "data" / "train.v1-x_y") == str((tmp_path / "data").resolve())
    hook = json.loads((job / "input" / "config" / "debughookconfig.json").read_text())
    assert hook["LocalPath"] == str(job.resolve() / "output" / "tensors")
