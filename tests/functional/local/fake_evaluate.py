"""A stand-in for rules/evaluate.py that follows its contract (status.json, exit codes, SIGTERM -> Stopped).

It lets the local runner's tests decide exactly when a rule fires, hangs or crashes. Behaviour comes
from its RuleParameters (``--param``), so a DebugRuleConfiguration drives it like a real rule:

    fake=fire_on_file  fire IssuesFound once ``<trial>/<file>`` exists; NoIssuesFound at the end marker
    fake=quiet         NoIssuesFound once the end marker exists
    fake=hang          ignore SIGTERM and never finish
    fake=crash         exit 1 without a final status
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sys
import time
from pathlib import Path


def write(out: Path, name: str, status: str, details: str, step: int | None = None) -> None:
    doc = {"RuleConfigurationName": name, "RuleEvaluationStatus": status, "StatusDetails": details,
           "LastModifiedTime": dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z"), "Step": step}
    tmp = out / ".status.json.tmp"
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, out / "status.json")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--trial-dir", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--rule-configuration-name", required=True)
    p.add_argument("--poll-interval", type=float, default=0.2)
    p.add_argument("--param", action="append", default=[])
    p.add_argument("--end-step", type=int)
    p.add_argument("--wait-timeout", type=float)  # part of the contract (rules/README.md); no waiting here
    args = p.parse_args()
    params = dict(item.split("=", 1) for item in args.param)
    out, trial, name = Path(args.output_dir), Path(args.trial_dir), args.rule_configuration_name
    (out / "argv.json").write_text(json.dumps({"argv": sys.argv, "env_actions": os.environ.get("SDK_EXT_RULE_ACTIONS"),
                                               "pid": os.getpid()}))
    mode = params.get("fake", "quiet")
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        def stopped(signum: int, frame: object) -> None:
            write(out, name, "Stopped", "Rule evaluation stopped by a signal")
            sys.exit(4)
        signal.signal(signal.SIGTERM, stopped)
    write(out, name, "InProgress", "Rule evaluation started")
    if mode == "crash":
        print("fake evaluator: crashing on purpose", flush=True)
        return 1
    deadline = time.monotonic() + 120  # never outlive a broken test for long
    while time.monotonic() < deadline:
        if mode == "fire_on_file" and (trial / params["file"]).exists():
            step = int((trial / params["file"]).read_text() or 0)
            write(out, name, "IssuesFound", f"RuleEvaluationConditionMet: Evaluation of the rule {name} at step "
                  f"{step} resulted in the condition being met\n", step)
            return 3
        if mode != "hang" and (trial / "training_job_end.ts").exists():
            write(out, name, "NoIssuesFound", "Training ended")
            return 0
        time.sleep(args.poll_interval)
    return 2


if __name__ == "__main__":
    sys.exit(main())
