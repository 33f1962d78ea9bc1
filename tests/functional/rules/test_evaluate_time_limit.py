"""A stuck rule ends: rules/evaluate.py's per-invocation time limit and its SIGTERM deadline hold whatever
the rule does (a busy loop, a loop that catches BaseException), measured on real subprocesses."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError, RuleEvaluationConditionMet
from sdk_ext.rules import Rule, StalledTrainingRule, invoke_rule
from sdk_ext.rules.factory import split_parameters
from sdk_ext.rules.time_limit import (
    DEFAULT_INVOKE_TIMEOUT,
    HARD_GRACE,
    InvocationTimeout,
    Watchdog,
    parse_timeout,
)
from sdk_ext.trials import create_trial
from tests.functional.rules.test_evaluate import EVALUATE, evaluate, read_status, wait_for
from tests.functional.rules.trial_writer import TrialWriter, write_trial

RULES = textwrap.dedent("""
    import time
    from sdk_ext.rules import Rule

    class BusyLoop(Rule):
        def invoke_at_step(self, step):
            while step == 2:
                pass
            return False

    class Stubborn(Rule):
        '''Loops at step 2 and swallows everything, SIGTERM's exception and the time limit's included.'''
        def invoke_at_step(self, step):
            while step == 2:
                try:
                    time.sleep(0.01)
                except BaseException:
                    pass
            return False

    class Quick(Rule):
        def invoke_at_step(self, step):
            return False

    class BusyInvoke(Rule):
        '''Replaces invoke (as StalledTrainingRule does) and computes forever at step 2, without waiting.'''
        def invoke(self, step):
            while step == 2:
                pass

        def invoke_at_step(self, step):
            return False

    class WaitsThroughTheTrial(Rule):
        '''Replaces invoke and waits for each step with smdebug's public trial API.'''
        def invoke(self, step):
            self.base_trial.wait_for_steps([step])
            super().invoke(step)

        def invoke_at_step(self, step):
            return False
""")


@pytest.fixture
def trial(tmp_path: Path) -> Path:
    return write_trial(tmp_path / "trial", [(s, {"gradient/w": np.full(4, 0.5)}) for s in range(5)])


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "stuck_rules.py"
    path.write_text(RULES)
    return path


def args(trial: Path, rules_file: Path, out: Path, cls: str, *params: str) -> list[str]:
    argv = ["--trial-dir", str(trial), "--source", str(rules_file), "--rule-to-invoke", cls, "--output-dir", str(out),
            "--rule-configuration-name", f"{cls}Config"]
    for p in params:
        argv += ["--param", p]
    return argv


@pytest.mark.parametrize("cls", ["BusyLoop", "Stubborn", "BusyInvoke"])
def test_a_rule_stuck_at_a_step_ends_in_error_naming_rule_and_step(  # type: ignore[no-untyped-def]
    cls: str, trial: Path, rules_file: Path, tmp_path: Path, repo_env
) -> None:
    out = tmp_path / "out"
    started = time.monotonic()
    code, status, stderr = evaluate(args(trial, rules_file, out, cls, "invoke_timeout_secs=1"), repo_env, timeout=60)
    took = time.monotonic() - started
    assert code == 2, stderr
    assert status["RuleEvaluationStatus"] == "Error" and status["Step"] == 2
    assert status["RuleConfigurationName"] == f"{cls}Config"
    assert status["StatusDetails"].startswith(
        f"RuleTimeout: rule {cls}: the invocation at step 2 did not finish within 1 s; raise the RuleParameter "
        "invoke_timeout_secs")
    # the busy loop is interrupted at its limit; the stubborn one, which swallows that, is ended HARD_GRACE later
    assert took < 1 + HARD_GRACE + 20  # interpreter start and imports included; never the 570 s hang of before
    print(f"\n{cls}: limit 1 s, evaluator ended after {took:.2f} s")


def test_sigterm_ends_a_rule_that_swallows_base_exception_within_the_grace_time(  # type: ignore[no-untyped-def]
    trial: Path, rules_file: Path, tmp_path: Path, repo_env
) -> None:
    out = tmp_path / "out"
    env = dict(repo_env, SDK_EXT_RULE_TERM_GRACE_SECS="1")
    rule = subprocess.Popen([sys.executable, EVALUATE, *args(trial, rules_file, out, "Stubborn",
                                                             "invoke_timeout_secs=0")],  # no time limit: only SIGTERM
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: read_status(out).get("RuleEvaluationStatus") == "InProgress", what="InProgress")
        time.sleep(1.0)  # well inside its loop at step 2
        sent = time.monotonic()
        rule.send_signal(signal.SIGTERM)
        code = rule.wait(timeout=30)
        took = time.monotonic() - sent
    finally:
        if rule.poll() is None:
            rule.kill()
        _, stderr = rule.communicate()
    assert code == 4, stderr
    status = read_status(out)
    assert status["RuleEvaluationStatus"] == "Stopped"
    assert "forced after 1 s: the rule did not return" in status["StatusDetails"]
    assert 1.0 <= took < 1.0 + 5  # the grace time, not the runner's SIGKILL (10 s locally) or forever
    print(f"\nStubborn + SIGTERM: grace 1 s, exited after {took:.2f} s")


def test_sigterm_ends_a_busy_loop_at_once(trial: Path, rules_file: Path, tmp_path: Path, repo_env) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    rule = subprocess.Popen([sys.executable, EVALUATE, *args(trial, rules_file, out, "BusyLoop", "invoke_timeout_secs=0")],
                            env=repo_env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: read_status(out).get("RuleEvaluationStatus") == "InProgress", what="InProgress")
        time.sleep(1.0)
        rule.send_signal(signal.SIGTERM)
        assert rule.wait(timeout=30) == 4
    finally:
        if rule.poll() is None:
            rule.kill()
        rule.communicate()
    status = read_status(out)
    assert status["RuleEvaluationStatus"] == "Stopped" and status["StatusDetails"] == "Rule evaluation stopped by a signal"


def test_a_quick_rule_is_not_limited_and_a_bad_limit_is_a_client_error(  # type: ignore[no-untyped-def]
    trial: Path, rules_file: Path, tmp_path: Path, repo_env
) -> None:
    code, status, _ = evaluate(args(trial, rules_file, tmp_path / "a", "Quick", "invoke_timeout_secs=1"), repo_env)
    assert (code, status["RuleEvaluationStatus"]) == (0, "NoIssuesFound")
    code, status, _ = evaluate(args(trial, rules_file, tmp_path / "b", "Quick", "invoke_timeout_secs=soon"), repo_env)
    assert (code, status["RuleEvaluationStatus"]) == (2, "Error")
    assert "invoke_timeout_secs='soon': expected a number of seconds >= 0" in status["StatusDetails"]


def test_the_limit_is_a_reserved_parameter_with_a_documented_default() -> None:
    assert DEFAULT_INVOKE_TIMEOUT == 300.0
    assert split_parameters({}).time_limit == 300.0
    request = split_parameters({"invoke_timeout_secs": "2.5", "threshold": "1"})
    assert request.time_limit == 2.5 and request.parameters == {"threshold": "1"}  # not passed to the rule
    assert split_parameters({"invoke_timeout_secs": "0"}).time_limit is None
    assert parse_timeout(" ") == 300.0
    with pytest.raises(ConfigError, match="invoke_timeout_secs='-1'"):
        parse_timeout("-1")


class _Slow(Rule):
    def invoke_at_step(self, step: int) -> bool:
        while step == 1:
            time.sleep(0.01)
        return False


def test_invoke_rule_in_a_notebook_raises_and_does_not_exit(trial: Path) -> None:
    rule = _Slow(create_trial(str(trial)))
    with pytest.raises(InvocationTimeout) as err:
        invoke_rule(rule, time_limit=0.3)
    assert (err.value.rule, err.value.step, err.value.limit) == ("_Slow", 1, 0.3)


def test_the_watchdog_acts_only_when_the_invocation_outlives_its_grace() -> None:
    now = [0.0]
    exits: list[int] = []
    dog = Watchdog(clock=lambda: now[0], exit=exits.append)
    stuck: list[InvocationTimeout] = []
    dog.on_stuck(lambda err: stuck.append(err) or 2)
    dog.enter("R", 7, 1.0)
    dog.leave()  # finished in time: nothing happens
    now[0] = 100.0
    dog.enter("R", 8, 1.0)
    now[0] = 101.0 + HARD_GRACE + 0.1  # the watchdog re-reads the clock at least once a second
    wait_for(lambda: exits, what="forced exit", timeout=5)
    assert exits == [2] and stuck[0].step == 8 and stuck[0].rule == "R"


def _still_training(path: Path, steps: int) -> TrialWriter:
    writer = TrialWriter(path)
    for s in range(steps):
        writer.step(s, {"loss": np.float32(1.0 / (s + 1))})
    writer.close(end=False)
    return writer


def test_stalled_training_fires_at_its_threshold_even_above_the_time_limit(  # type: ignore[no-untyped-def]
    tmp_path: Path, repo_env
) -> None:
    # the job wrote steps 0-2 and then nothing: the rule waits 3 s for a new step, three times the 1 s limit
    # on the rule's own code; waiting for data is not the rule being stuck, so it fires (it used to end in
    # Error RuleTimeout after 1 s, and with the defaults, 300 s, before the 1800 s threshold could ever fire)
    trial = tmp_path / "trial"
    _still_training(trial, 3)
    out = tmp_path / "out"
    code, status, stderr = evaluate(["--trial-dir", str(trial), "--rule-name", "StalledTrainingRule",
                                     "--param", "threshold=3", "--param", "invoke_timeout_secs=1",
                                     "--output-dir", str(out)], repo_env, timeout=120)
    assert code == 3, stderr
    assert status["RuleEvaluationStatus"] == "IssuesFound" and status["Step"] == 2
    assert "no new step for" in status["StatusDetails"]
    assert "(threshold 3 s); last step written: 2" in status["StatusDetails"]


def test_a_rule_waiting_through_the_trial_api_is_not_timed_while_it_waits(  # type: ignore[no-untyped-def]
    rules_file: Path, tmp_path: Path, repo_env
) -> None:
    trial = tmp_path / "trial"
    writer = _still_training(trial, 1)
    out = tmp_path / "out"
    rule = subprocess.Popen([sys.executable, EVALUATE, *args(trial, rules_file, out, "WaitsThroughTheTrial",
                                                             "invoke_timeout_secs=1")],
                            env=repo_env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: read_status(out).get("RuleEvaluationStatus") == "InProgress", what="InProgress")
        time.sleep(2.5)  # the rule waits in trial.wait_for_steps([1]) for longer than its 1 s limit
        writer.step(1, {"loss": np.float32(0.5)})
        writer.close(end=True)
        code = rule.wait(timeout=60)
    finally:
        if rule.poll() is None:
            rule.kill()
        _, stderr = rule.communicate()
    status = read_status(out)
    assert code == 0, (status, stderr[-2000:])
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert status["StatusDetails"] == "Training ended; last saved step: 1"


def test_invoke_rule_does_not_time_the_stalled_rule_s_wait(tmp_path: Path) -> None:
    _still_training(tmp_path / "trial", 2)
    rule = StalledTrainingRule(create_trial(str(tmp_path / "trial")), threshold="0.6")
    started = time.monotonic()
    with pytest.raises(RuleEvaluationConditionMet) as fired:
        invoke_rule(rule, raise_eval_cond=True, poll_interval=0.05, time_limit=0.2)
    assert fired.value.step == 1 and time.monotonic() - started > 0.6


class _ComputesForeverAfterWaiting(Rule):
    """Replaces invoke: waits for the step like Rule.invoke, then computes forever at step 1."""

    def invoke(self, step: int) -> None:
        super().invoke(step)
        while step == 1:
            sum(range(1000))

    def invoke_at_step(self, step: int) -> bool:
        return False


def test_a_rule_computing_after_a_wait_is_still_stopped_at_its_limit(trial: Path) -> None:
    rule = _ComputesForeverAfterWaiting(create_trial(str(trial)))
    with pytest.raises(InvocationTimeout) as err:
        invoke_rule(rule, time_limit=0.3)
    assert (err.value.rule, err.value.step, err.value.limit) == ("_ComputesForeverAfterWaiting", 1, 0.3)


def test_a_profiler_rule_waiting_for_its_next_window_is_not_timed(tmp_path: Path, repo_env) -> None:  # type: ignore[no-untyped-def]
    from tests.unit.profiler_rules.files import end_job, local, metric, write_system

    storage = local(tmp_path / "profiler-output")
    t0 = 1_700_000_000.0
    write_system(storage, [metric("GPUUtilization", "gpu0", 90.0, t0 + i * 0.5) for i in range(10)])  # 5 s of data
    out = tmp_path / "out"
    rule = subprocess.Popen([sys.executable, EVALUATE, "--trial-dir", str(tmp_path / "profiler-output"),
                             "--rule-name", "LowGPUUtilization", "--param", "scan_interval_us=10000000",
                             "--param", "invoke_timeout_secs=1", "--output-dir", str(out)],
                            env=repo_env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: read_status(out).get("RuleEvaluationStatus") == "InProgress", what="InProgress")
        time.sleep(2.5)  # the rule waits for data reaching the end of its first 10 s window, past its 1 s limit
        write_system(storage, [metric("GPUUtilization", "gpu0", 90.0, t0 + 5 + i * 0.5) for i in range(50)])
        end_job(storage)
        code = rule.wait(timeout=60)
    finally:
        if rule.poll() is None:
            rule.kill()
        _, stderr = rule.communicate()
    status = read_status(out)
    assert code == 0, (status, stderr[-2000:])
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
