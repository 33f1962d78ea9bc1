"""Helpers for the local-job tests: requests, training scripts, settings, and process checks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import textwrap
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sdk_ext.local import LocalSettings

HERE = Path(__file__).resolve().parent

# Reads the hook config the runner wrote (as a hook would) to find the trial directory.
PRELUDE = """
import json, os, sys, time
from pathlib import Path
TRIAL = Path(json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"]))["LocalPath"])
TRIAL.mkdir(parents=True, exist_ok=True)
"""

BAD = PRELUDE + """
for step in range(100000):
    if step == 5:
        (TRIAL / "bad_step").write_text(str(step))
    time.sleep(0.01)
    if step > 6000:  # ~60 s: nobody stopped us
        break
print("finished without being stopped")
"""

HEALTHY = PRELUDE + """
for step in range(5):
    (TRIAL / f"step_{step}").write_text("ok")
print("healthy training done")
"""

CRASH = PRELUDE + """
print("step 0 ok", flush=True)
raise ValueError("boom at step 3")
"""


def fake_rules_dir(tmp_path: Path) -> Path:
    """A rules directory whose evaluate.py is the contract-following fake."""
    rules = tmp_path / "fake-rules"
    rules.mkdir(exist_ok=True)
    shutil.copy(HERE / "fake_evaluate.py", rules / "evaluate.py")
    return rules


def write_script(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    path = code / name
    path.write_text(textwrap.dedent(body))
    return path


def rule(name: str, **params: str) -> dict[str, Any]:
    return {"RuleConfigurationName": name, "RuleEvaluatorImage": "local",
            "RuleParameters": {"rule_to_invoke": name, **params}}


def request(name: str, *, rules: Iterable[Mapping[str, Any]] = (), **extra: Any) -> dict[str, Any]:
    req: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "local", "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::000000000000:role/local",
        "OutputDataConfig": {"S3OutputPath": "s3://local/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.large", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 300},
        "DebugHookConfig": {"S3OutputPath": "s3://local/debug", "CollectionConfigurations": []},
    }
    rules = list(rules)
    if rules:
        req["DebugRuleConfigurations"] = rules
    req.update(extra)
    return req


def settings(tmp_path: Path, **changes: Any) -> LocalSettings:
    """Fast settings: short poll and grace periods, the fake evaluator unless rules_dir is given."""
    values: dict[str, Any] = {
        "jobs_root": tmp_path / "jobs", "python": sys.executable, "poll_interval": 0.02,
        "rule_poll_interval": 0.02, "stop_grace": 3.0, "rule_timeout": 20.0, "rule_stop_grace": 2.0,
        "rules_dir": fake_rules_dir(tmp_path),
    }
    values.update(changes)
    return LocalSettings(**values)


def alive(pid: int) -> bool:
    """Is ``pid`` a live process (a zombie waiting for a reaper counts as gone)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def wait_gone(pids: Iterable[int], timeout: float = 10.0) -> list[int]:
    """Poll until none of ``pids`` is alive; return those still alive at the deadline."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def job_pids(job_dir: Path) -> list[int]:
    """Every child pid the runner recorded in job.json (training, system monitor and rule evaluators)."""
    local = json.loads((job_dir / "job.json").read_text())["SdkExtLocal"]
    pids = [local[k] for k in ("TrainingPid", "MonitorPid") if local.get(k)]
    rules = [*local["Rules"].values(), *(local.get("ProfilerRules") or {}).values()]
    return pids + [r["Pid"] for r in rules if r.get("Pid")]


def events(job_dir: Path) -> list[dict[str, Any]]:
    path = job_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def poll_until(predicate: Any, timeout: float = 20.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        time.sleep(interval)

# Saves a loss, a gradient and a weight every step through the framework-free hook; at step 20 the
# values go NaN and the fake rule's trigger file says so; then it keeps training until stopped.
HOOKED = PRELUDE + """
import numpy as np
from sdk_ext.hooks import Hook, SaveConfig
hook = Hook(TRIAL, save_config=SaveConfig(save_interval=1),
            include_collections=["losses", "gradients", "weights"])
w = np.full((8, 4), 0.5, dtype=np.float32)
for step in range(100000):
    with hook.step():
        if step >= 20:
            w = w * np.float32("nan")
        loss = np.float32(2.0 / (step + 1))
        hook.save_tensor("CrossEntropyLoss_output_0", loss, "losses")
        hook.save_tensor("gradient/Net_fc1.weight", w * 0.1, "gradients")
        hook.save_tensor("gradient/Net_fc2.weight", w * 0.01 + 1e-3, "gradients")
        hook.save_tensor("Net_fc1.weight", w, "weights")
    if step == 21:  # step 20 is complete once step 21 is written
        (TRIAL / "bad_step").write_text("20")
    time.sleep(0.01)
    if step > 6000:
        break
hook.close()
"""


def ctrl_c_reaches_it() -> None:
    """``preexec_fn`` for a child the test interrupts: SIGINT at its default, as on a terminal, even when
    this test run inherited it ignored (started in the background from a non-interactive shell, or
    under nohup), where Python would keep ignoring it and Ctrl-C would never reach the job."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
