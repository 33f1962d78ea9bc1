"""One timed run of the profiler rules over profiler output, in a fresh process (tests/bench/profiler_rules.py).

    python _profiler_rules_worker.py sdk_ext ROOT
    python _profiler_rules_worker.py original ROOT RULES_DIR     (smdebug 1.0.34's venv)

``sdk_ext``: ProfilerReport over a ProfilerTrial, as the rule evaluator runs it (every sub-rule, each window
read once). ``original``: the 2020 rule classes (extracted by the driver into RULES_DIR as the package
``orig_rules``) driven the way their ProfilerReport drove them: smdebug 1.0.34's ProfilerTrial fetches each
60 s window's system and framework events once and hands them to every rule's ``invoke_for_timerange``
(the 2020 ProfilerReport module itself needs the report notebook's plotting stack, so it is not imported).
Prints one JSON line: seconds, windows, peak RSS (MiB), and per rule RuleTriggered and Violations.
"""

import json
import logging
import resource
import sys
import time

RULES = ("CPUBottleneck", "IOBottleneck", "LowGPUUtilization", "StepOutlier", "GPUMemoryIncrease", "BatchSize",
         "MaxInitializationTime", "LoadBalancing", "OverallSystemUsage", "Dataloader")


def run_sdk_ext(root: str) -> dict:
    from sdk_ext.profiler.analysis.rules import ProfilerReport
    from sdk_ext.profiler.profiler_trial import ProfilerTrial
    from sdk_ext.rules import invoke_rule

    began = time.perf_counter()
    report = ProfilerReport(ProfilerTrial(root, poll_interval=0.01))
    try:
        invoke_rule(report, raise_eval_cond=True)
    except Exception as err:  # RuleEvaluationConditionMet at the end: some sub-rule fired
        if type(err).__name__ != "RuleEvaluationConditionMet":
            raise
    seconds = time.perf_counter() - began
    rules = {r.rule_name: [int(r.report["RuleTriggered"]), int(r.report["Violations"])] for r in report.rules}
    return {"seconds": seconds, "windows": report.windows, "rules": rules}


def run_original(root: str, rules_dir: str) -> dict:
    import importlib

    sys.path.insert(0, rules_dir)
    import smdebug.rules.rule as smdebug_rule
    from smdebug.exceptions import NoMoreProfilerData
    from smdebug.trials.profiler_trial import ProfilerTrial

    smdebug_rule.Rule.__init__.__defaults__ = ("", None)  # the 2020 rules predate action_str
    import time as time_module

    real_sleep = time_module.sleep
    time_module.sleep = lambda s: None  # ProfilerTrial sleeps 10 s after finding its first file
    began = time.perf_counter()
    import tempfile

    trial = ProfilerTrial("bench", root, tempfile.mkdtemp(prefix="bench-original-out-"))
    time_module.sleep = real_sleep
    modules = {"CPUBottleneck": "cpu_bottleneck", "IOBottleneck": "io_bottleneck",
               "LowGPUUtilization": "low_gpu_utilization", "StepOutlier": "step_outlier",
               "GPUMemoryIncrease": "gpu_memory_increase", "BatchSize": "batch_size",
               "MaxInitializationTime": "max_initialization_time", "LoadBalancing": "load_balancing",
               "OverallSystemUsage": "overall_system_usage", "Dataloader": "dataloader"}
    rules = []
    skipped = {}
    for name in RULES:
        try:
            module = importlib.import_module(f"orig_rules.{modules[name]}")
        except ImportError as err:  # LoadBalancing needs scipy, which smdebug's venv lacks
            skipped[name] = str(err)
            continue
        rules.append(getattr(module, name)(trial))
    last, windows = trial.first_timestamp, 0
    while True:
        end = last + 60_000_000
        try:
            trial.wait_for_data(end, last)
        except NoMoreProfilerData:
            break
        system = trial.get_system_metrics(last, end)
        framework = trial.get_framework_metrics(last, end)
        for rule in rules:
            rule.invoke_for_timerange(last, end, system, framework)
        last, windows = end, windows + 1
    seconds = time.perf_counter() - began
    out = {r.rule_name: [int(r.report["RuleTriggered"]), int(r.report["Violations"])] for r in rules}
    return {"seconds": seconds, "windows": windows, "rules": out, "skipped": skipped}


def main() -> None:
    logging.disable(logging.WARNING)
    mode, root = sys.argv[1], sys.argv[2]
    result = run_sdk_ext(root) if mode == "sdk_ext" else run_original(root, sys.argv[3])
    result["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


if __name__ == "__main__":
    main()
