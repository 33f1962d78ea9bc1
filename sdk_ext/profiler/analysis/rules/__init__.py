"""The profiler rules, by their SageMaker names (smdebug's ``smdebug.profiler.analysis.rules`` path).

    from sdk_ext.profiler.analysis.rules import LowGPUUtilization, ProfilerTrial
    from sdk_ext.rules import invoke_rule

    invoke_rule(LowGPUUtilization(ProfilerTrial("path/to/profiler-output"), threshold_p95="50"))

Each rule reads the profiler output in time windows (base.py); its arithmetic is a pure function in its
module. The rule evaluator (rules/evaluate.py) runs them from ``ProfilerRuleConfigurations`` as it runs
tensor rules. docs/PROFILING.md ("Profiler rules") describes each algorithm as implemented.
"""

from __future__ import annotations

from sdk_ext.profiler.analysis.rules.base import ProfilerData, ProfilerRule
from sdk_ext.profiler.analysis.rules.batch_size import BatchSize
from sdk_ext.profiler.analysis.rules.cpu_bottleneck import CPUBottleneck
from sdk_ext.profiler.analysis.rules.dataloader import Dataloader
from sdk_ext.profiler.analysis.rules.gpu_memory_increase import GPUMemoryIncrease
from sdk_ext.profiler.analysis.rules.io_bottleneck import IOBottleneck
from sdk_ext.profiler.analysis.rules.load_balancing import LoadBalancing
from sdk_ext.profiler.analysis.rules.low_gpu_utilization import LowGPUUtilization
from sdk_ext.profiler.analysis.rules.max_initialization_time import MaxInitializationTime
from sdk_ext.profiler.analysis.rules.overall_framework_metrics import OverallFrameworkMetrics
from sdk_ext.profiler.analysis.rules.overall_system_usage import OverallSystemUsage
from sdk_ext.profiler.analysis.rules.profiler_report import ProfilerReport
from sdk_ext.profiler.analysis.rules.step_outlier import StepOutlier

#: SageMaker name -> class.
PROFILER_RULES: dict[str, type[ProfilerRule]] = {
    cls.__name__: cls
    for cls in (
        LowGPUUtilization, CPUBottleneck, IOBottleneck, GPUMemoryIncrease, BatchSize, LoadBalancing,
        OverallSystemUsage, StepOutlier, MaxInitializationTime, Dataloader, OverallFrameworkMetrics,
        ProfilerReport,
    )
}


def find_profiler_rule(name: str) -> type[ProfilerRule] | None:
    """The profiler rule class named ``name`` (case and surrounding blanks ignored), or None."""
    wanted = name.strip().lower()
    return next((cls for known, cls in PROFILER_RULES.items() if known.lower() == wanted), None)


__all__ = [
    "PROFILER_RULES", "BatchSize", "CPUBottleneck", "Dataloader", "GPUMemoryIncrease", "IOBottleneck",
    "LoadBalancing", "LowGPUUtilization", "MaxInitializationTime", "OverallFrameworkMetrics",
    "OverallSystemUsage", "ProfilerData", "ProfilerReport", "ProfilerRule", "StepOutlier", "find_profiler_rule",
]
