"""LowGPUUtilization live on a real GPU: it fires on a job that leaves its GPU idle and stays quiet on one that
keeps it busy. Needs CUDA and NVML (nvidia-ml-py); skips cleanly elsewhere (the GPU logic is tested with
synthetic metric files in test_evaluate_profiler_rules.py and with a fake NVML in tests/unit/profiler)."""

from __future__ import annotations

import pytest

from sdk_ext.debugger import DebuggerHookConfig, ProfilerConfig, ProfilerRule, apply_debugger, rule_configs
from sdk_ext.local import run_training_job
from tests.functional.local.support import settings, write_script


def _gpu_ready() -> bool:
    try:
        import pynvml
        import torch
    except ImportError:
        return False
    if not torch.cuda.is_available():
        return False
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetCount() > 0
    except Exception:  # noqa: BLE001 - no driver: no GPU test
        return False


pytestmark = pytest.mark.skipif(not _gpu_ready(), reason="needs a CUDA GPU and NVML (nvidia-ml-py)")

TRAIN = """
import argparse, time
import torch
from sdk_ext.hooks import Hook
p = argparse.ArgumentParser()
p.add_argument("--busy", type=int, default=0)
p.add_argument("--seconds", type=float, default=6.0)
args = p.parse_args()
hook = Hook.create_from_json_file()
x = torch.randn(4096, 4096, device="cuda")
end = time.time() + args.seconds
while time.time() < end:
    with hook.step():
        if args.busy:
            for _ in range(20):
                x = torch.tanh(x @ x)
            torch.cuda.synchronize()
        else:
            time.sleep(0.05)
hook.close()
"""


@pytest.mark.parametrize(("busy", "expected"), [(0, "IssuesFound"), (1, "NoIssuesFound")])
def test_low_gpu_utilization_on_a_real_gpu(tmp_path, busy, expected):
    rule = ProfilerRule.sagemaker(rule_configs.LowGPUUtilization(patience=20, window=20, scan_interval_us=1_000_000))
    request = apply_debugger({
        "TrainingJobName": f"gpu-{busy}", "AlgorithmSpecification": {"TrainingImage": "local",
                                                                     "TrainingInputMode": "File"},
        "OutputDataConfig": {"S3OutputPath": "s3://local/output"},
        "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 120}, "HyperParameters": {"busy": str(busy)},
    }, debugger_hook_config=DebuggerHookConfig(), rules=[rule], region="us-east-1",
        profiler_config=ProfilerConfig(system_monitor_interval_millis=100))
    final = run_training_job(request, settings=settings(tmp_path, rules_dir=None, profiler_file_seconds=1.0),
                             entry_point=write_script(tmp_path, TRAIN))
    (status,) = final["ProfilerRuleEvaluationStatuses"]
    assert status["RuleEvaluationStatus"] == expected, status
