"""Local loop: stop latency, from the bad step being written to the job being Stopped.

    python -m tests.bench.local_stop [--runs 10] [--write-md]

Each run is a local job (sdk_ext.local) whose training script saves, through the framework-free hook
and its debughookconfig.json, a 256x256 weight and a loss every step (50 ms apart); at step 30 the
weight turns NaN. ExplodingTensor runs in the real rules/evaluate.py, the state-change events go
to lambda/auto_stop.py's handler, whose StopTrainingJob SIGTERMs the training process.

Measured per run, on one clock (wall time; the index file's mtime is when the hook committed it):
* written: the bad step's index file appears (readers can see the step from then on);
* IssuesFound: the rule's status.json says so (its LastModifiedTime);
* Stopping: the auto-stop handler's StopTrainingJob was accepted (SecondaryStatusTransitions);
* Stopped: the training process has exited and the job is Stopped (TrainingEndTime).
Goal: written -> Stopped under 5 s. There is no smdebug counterpart to compare with: on SageMaker
this path goes through S3, a Processing job, EventBridge and Lambda.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import textwrap
from datetime import datetime
from pathlib import Path

from sdk_ext.format.paths import DEFAULT_WORKER, index_key
from sdk_ext.local import LocalSettings, run_training_job
from tests.bench._markdown import write_section

REPO = Path(__file__).resolve().parents[2]
BAD_STEP = 30

TRAIN = """
import json, os, sys, time
import numpy as np
from sdk_ext.hooks import Hook, SaveConfig
if hasattr(Hook, "create_from_json_file"):
    hook = Hook.create_from_json_file()
else:  # until the hook reads SageMaker's config itself: the same settings, by hand
    config = json.load(open(os.environ["SMDEBUG_CONFIG_FILE_PATH"]))
    hook = Hook(config["LocalPath"], save_config=SaveConfig(save_interval=1), include_collections=["weights", "losses"])
w = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
for step in range(2000):
    with hook.step():
        if step == BAD_STEP:
            w[0, 0] = np.nan
        hook.save_tensor("dense/weight", w, "weights")
        hook.save_tensor("loss", np.float32(1.0 / (step + 1)), "losses")
    time.sleep(0.05)
hook.close()
"""


def request(name: str) -> dict:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "local", "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://local/output"},
        "ResourceConfig": {"InstanceType": "local", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "DebugHookConfig": {"S3OutputPath": "s3://local/debug", "HookParameters": {"save_interval": "1"},
                            "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "losses"}]},
        "DebugRuleConfigurations": [{"RuleConfigurationName": "ExplodingTensor", "RuleEvaluatorImage": "local",
                                     "RuleParameters": {"rule_to_invoke": "ExplodingTensor"}}],
    }


def _ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def one_run(root: Path, i: int, rule_poll: float) -> dict[str, float]:
    script = root / "train.py"
    script.write_text(textwrap.dedent(TRAIN).replace("BAD_STEP", str(BAD_STEP)))
    name = f"stop-{str(rule_poll).replace('.', '')}-{i}"
    final = run_training_job(request(name), settings=LocalSettings(jobs_root=root / "jobs", rule_poll_interval=rule_poll),
                             entry_point=script)
    if final["TrainingJobStatus"] != "Stopped":
        raise RuntimeError(f"run {name}: the job ended {final['TrainingJobStatus']}, not Stopped")
    job = json.loads((root / "jobs" / name / "job.json").read_text())
    trial = Path(job["SdkExtLocal"]["TrialDir"])
    written = (trial / index_key(BAD_STEP, DEFAULT_WORKER)).stat().st_mtime
    rule = job["DebugRuleEvaluationStatuses"][0]
    stopping = next(t["StartTime"] for t in job["SecondaryStatusTransitions"] if t["Status"] == "Stopping")
    t = {"issues": _ts(rule["LastModifiedTime"]), "stopping": _ts(stopping), "stopped": _ts(job["TrainingEndTime"])}
    return {"detect": t["issues"] - written, "handler": t["stopping"] - t["issues"],
            "terminate": t["stopped"] - t["stopping"], "total": t["stopped"] - written}


def summarize(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(values):.2f} / {p95:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rule-poll", type=float, action="append", help="evaluator poll interval(s) (default 0.2)")
    parser.add_argument("--write-md", action="store_true", help="update this section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    if not (REPO / "rules" / "evaluate.py").is_file():
        print("rules/evaluate.py not found: local_stop skipped", file=sys.stderr)
        return 0
    rows = []
    for poll in args.rule_poll or [0.2]:
        root = Path(tempfile.mkdtemp(prefix="sdk-ext-bench-stop-"))
        try:
            runs = [one_run(root, i, poll) for i in range(args.runs)]
        finally:
            shutil.rmtree(root, ignore_errors=True)
        cols = [summarize([r[k] for r in runs]) for k in ("detect", "handler", "terminate", "total")]
        worst = max(r["total"] for r in runs)
        rows.append(f"| {poll} s | {args.runs} | " + " | ".join(cols) + f" | {worst:.2f} |")
    body = (
        "## Local loop: stop latency (bad step written -> job Stopped)\n\n"
        f"`python -m tests.bench.local_stop --runs {args.runs}"
        + "".join(f" --rule-poll {p}" for p in args.rule_poll or []) + " --write-md` "
        f"({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}). Seconds, "
        "median / p95 over the runs. Goal: total under 5 s.\n\n"
        "| evaluator poll | runs | written -> IssuesFound | IssuesFound -> Stopping (event, handler) | "
        "Stopping -> Stopped (SIGTERM, exit) | **total** | worst |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n"
    )
    print(body)
    if args.write_md:
        write_section("local_stop", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
