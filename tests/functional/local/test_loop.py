"""The whole local loop with a contract-following fake evaluator: exact control over when a rule fires.

The same loop with the real rules/evaluate.py and hook is in test_loop_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sdk_ext.local import LocalSageMakerClient, run_training_job
from tests.functional.local.support import (
    BAD,
    CRASH,
    HEALTHY,
    events,
    job_pids,
    request,
    rule,
    settings,
    wait_gone,
    write_script,
)


def _statuses(final: dict) -> dict[str, str]:
    return {r["RuleConfigurationName"]: r["RuleEvaluationStatus"] for r in final["DebugRuleEvaluationStatuses"]}


def test_job_that_goes_wrong_is_stopped_by_the_auto_stop_handler(tmp_path: Path) -> None:
    script = write_script(tmp_path, BAD)
    req = request("bad-job", rules=[rule("Exploding", fake="fire_on_file", file="bad_step"), rule("Quiet", fake="quiet")])
    final = run_training_job(req, settings=settings(tmp_path), entry_point=script)

    assert final["TrainingJobStatus"] == "Stopped"
    assert final["SecondaryStatus"] == "Stopped"
    assert "FailureReason" not in final
    assert _statuses(final) == {"Exploding": "IssuesFound", "Quiet": "NoIssuesFound"}
    fired = next(r for r in final["DebugRuleEvaluationStatuses"] if r["RuleConfigurationName"] == "Exploding")
    assert "at step 5 resulted in the condition being met" in fired["StatusDetails"]
    job_dir = tmp_path / "jobs" / "bad-job"
    # the handler, not the runner, stopped it: its decision is logged with the event that caused it
    stops = [r["result"] for e in events(job_dir) for r in e["results"] if r["result"]["action"] == "stopped"]
    assert len(stops) == 1 and stops[0]["rules"] == ["Exploding"] and stops[0]["job"] == "bad-job"
    assert [t["Status"] for t in final["SecondaryStatusTransitions"]] == ["Starting", "Training", "Stopping", "Stopped"]
    local = json.loads((job_dir / "job.json").read_text())["SdkExtLocal"]
    assert local["TrainingExitCode"] == -15  # SIGTERM
    assert local["Rules"]["Exploding"]["Step"] == 5
    assert (job_dir / "output" / "tensors" / "training_job_end.ts").exists()
    assert wait_gone(job_pids(job_dir), timeout=0) == []


def test_healthy_job_completes_with_no_issues_found(tmp_path: Path) -> None:
    script = write_script(tmp_path, HEALTHY)
    req = request("healthy-job", rules=[rule("Exploding", fake="fire_on_file", file="bad_step")])
    lines: list[str] = []
    final = run_training_job(req, settings=settings(tmp_path, output=lines.append), entry_point=script)

    assert final["TrainingJobStatus"] == "Completed"
    assert final["SecondaryStatus"] == "Completed"
    assert _statuses(final) == {"Exploding": "NoIssuesFound"}
    assert final["TrainingEndTime"] >= final["TrainingStartTime"] >= final["CreationTime"]
    assert "healthy training done" in lines
    job_dir = tmp_path / "jobs" / "healthy-job"
    assert "healthy training done" in (job_dir / "logs" / "training.log").read_text()
    assert all(r["result"]["action"] == "ignored" for e in events(job_dir) for r in e["results"])
    assert wait_gone(job_pids(job_dir), timeout=0) == []


def test_crashing_script_fails_with_its_error_in_failure_reason(tmp_path: Path) -> None:
    script = write_script(tmp_path, CRASH)
    req = request("crash-job", rules=[rule("Quiet", fake="quiet")])
    final = run_training_job(req, settings=settings(tmp_path), entry_point=script)

    assert final["TrainingJobStatus"] == "Failed"
    reason = final["FailureReason"]
    assert reason.startswith("AlgorithmError: ExecuteUserScriptError:")
    assert 'ErrorMessage "ValueError: boom at step 3"' in reason
    assert "ExitCode 1" in reason and "train.py" in reason
    assert len(reason) <= 1024
    assert _statuses(final) == {"Quiet": "NoIssuesFound"}  # the end marker ends the rules
    assert wait_gone(job_pids(tmp_path / "jobs" / "crash-job"), timeout=0) == []


def test_failure_file_written_by_the_script_is_the_failure_reason(tmp_path: Path) -> None:
    script = write_script(tmp_path, """
        import os, sys
        open(os.path.join(os.environ["SM_OUTPUT_DIR"], "failure"), "w").write("CUDA out of memory at step 7")
        sys.exit(3)
    """)
    final = run_training_job(request("oom-job"), settings=settings(tmp_path), entry_point=script)
    assert final["TrainingJobStatus"] == "Failed"
    assert final["FailureReason"] == "CUDA out of memory at step 7"


def test_rule_evaluation_that_never_ends_is_killed_after_the_rule_timeout(tmp_path: Path) -> None:
    script = write_script(tmp_path, HEALTHY)
    req = request("hang-job", rules=[rule("Hangs", fake="hang")])
    final = run_training_job(req, settings=settings(tmp_path, rule_timeout=0.5, rule_stop_grace=0.5),
                             entry_point=script)
    assert final["TrainingJobStatus"] == "Completed"
    hung = final["DebugRuleEvaluationStatuses"][0]
    assert hung["RuleEvaluationStatus"] == "Stopped"
    assert "still running" in hung["StatusDetails"]
    assert wait_gone(job_pids(tmp_path / "jobs" / "hang-job"), timeout=0) == []


def test_evaluator_that_dies_without_a_status_is_an_error_with_its_output(tmp_path: Path) -> None:
    script = write_script(tmp_path, HEALTHY)
    final = run_training_job(request("crash-rule", rules=[rule("Crashes", fake="crash")]),
                             settings=settings(tmp_path), entry_point=script)
    status = final["DebugRuleEvaluationStatuses"][0]
    assert status["RuleEvaluationStatus"] == "Error"
    assert "exited with code 1" in status["StatusDetails"]
    assert "crashing on purpose" in status["StatusDetails"]


def test_training_that_ignores_sigterm_is_killed_after_the_stop_grace(tmp_path: Path) -> None:
    script = write_script(tmp_path, "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + BAD)
    req = request("stubborn", rules=[rule("Exploding", fake="fire_on_file", file="bad_step")])
    final = run_training_job(req, settings=settings(tmp_path, stop_grace=0.3), entry_point=script)
    assert final["TrainingJobStatus"] == "Stopped"
    local = json.loads((tmp_path / "jobs" / "stubborn" / "job.json").read_text())["SdkExtLocal"]
    assert local["TrainingExitCode"] == -9


def test_max_runtime_stops_the_job(tmp_path: Path) -> None:
    script = write_script(tmp_path, "import time\ntime.sleep(60)\n")
    req = request("too-long", StoppingCondition={"MaxRuntimeInSeconds": 1})
    final = run_training_job(req, settings=settings(tmp_path), entry_point=script)
    assert final["TrainingJobStatus"] == "Stopped"
    assert final["SecondaryStatus"] == "MaxRuntimeExceeded"


def test_client_create_describe_stop(tmp_path: Path) -> None:
    from botocore.exceptions import ClientError

    from sdk_ext.debugger import rule_statuses, wait_for_rules

    client = LocalSageMakerClient(settings(tmp_path, auto_stop=False))
    script = write_script(tmp_path, BAD)
    code = str(script.parent)
    req = request("client-job", rules=[rule("Quiet", fake="quiet")],
                  HyperParameters={"sagemaker_program": '"train.py"', "sagemaker_submit_directory": f'"{code}"'})
    arn = client.create_training_job(**req)["TrainingJobArn"]
    assert arn == "arn:aws:sagemaker:local:000000000000:training-job/client-job"
    client.wait_for_status("client-job", {"InProgress"})
    client.stop_training_job(TrainingJobName="client-job")
    assert client.describe_training_job(TrainingJobName="client-job")["TrainingJobStatus"] in ("Stopping", "Stopped")
    with pytest.raises(ClientError) as err:
        client.stop_training_job(TrainingJobName="client-job")
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert "is in status Stop" in err.value.response["Error"]["Message"]
    final = client.wait("client-job", timeout=30)
    assert final["TrainingJobStatus"] == "Stopped"
    lines: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            lines.append(text)

    statuses = wait_for_rules("client-job", client, poll=0.01, timeout=5, writer=Out())
    assert [s["RuleEvaluationStatus"] for s in statuses] == ["NoIssuesFound"]
    assert rule_statuses(final)[0]["RuleConfigurationName"] == "Quiet"
    assert lines == ["Quiet: NoIssuesFound\n"]
    with pytest.raises(ClientError) as missing:
        client.describe_training_job(TrainingJobName="no-such-job")
    assert missing.value.response["Error"]["Message"] == "Requested resource not found."
    with pytest.raises(ClientError) as dup:
        client.create_training_job(**req)
    assert dup.value.response["Error"]["Code"] == "ResourceInUse"


def test_create_training_job_rejects_what_cannot_run_locally(tmp_path: Path) -> None:
    from botocore.exceptions import ClientError

    client = LocalSageMakerClient(settings(tmp_path))
    with pytest.raises(ClientError) as err:
        client.create_training_job(**request("no-entry"))
    message = err.value.response["Error"]["Message"]
    assert "sagemaker_program" in message and "ContainerEntrypoint" in message
    with pytest.raises(ClientError) as bad_name:
        client.create_training_job(**request("bad_name!"))
    assert "TrainingJobName" in bad_name.value.response["Error"]["Message"]
