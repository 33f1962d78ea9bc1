"""Each profiler rule fires and stays quiet on the vectors that were run against the 2020 code (plus the
deliberate fixes), fed as smdebug-style event lists to ``invoke_for_timerange``."""

from __future__ import annotations

import numpy as np
import pytest

from sdk_ext.profiler.analysis.rules import (
    BatchSize,
    CPUBottleneck,
    Dataloader,
    GPUMemoryIncrease,
    IOBottleneck,
    LoadBalancing,
    LowGPUUtilization,
    MaxInitializationTime,
    OverallSystemUsage,
    StepOutlier,
)
from tests.unit.profiler_rules.events import T0, FakeProfilerData, FwEvent, series, steps, us

WHOLE = (us(T0 - 1), us(T0 + 100_000))  # one window holding every synthetic event


def run(rule_cls, system=(), framework=(), **params):
    rule = rule_cls(FakeProfilerData(list(system), list(framework)), **params)
    fired = rule.invoke_for_timerange(*WHOLE, list(system), list(framework))
    return fired, rule


# --- LowGPUUtilization -------------------------------------------------------------------------------

@pytest.mark.parametrize(("values", "fires"), [
    ([50] * 1001, True),          # p95 50 < 70: underutilized
    ([50] * 1000, False),         # not more than patience samples yet
    ([90] * 1001, False),         # busy
    ([95, 0] * 501, True),        # p95 95 > 70 and p5 0 < 10: fluctuating
])
def test_low_gpu_utilization(values, fires):
    fired, rule = run(LowGPUUtilization, series("GPUUtilization", "gpu0", values))
    assert fired is fires
    assert bool(rule.report["RuleTriggered"]) is fires
    if fires:
        stats = rule.report["Details"]["algo-1"]["gpu0"]
        assert set(stats) >= {"gpu_max", "gpu_95", "gpu_5", "p25", "p50", "p75", "p95", "upper", "lower"}
        assert "gpu0 on algo-1" in rule.finding


def test_low_gpu_utilization_judges_each_gpu_and_node():
    system = (series("GPUUtilization", "gpu0", [90] * 1001) + series("GPUUtilization", "gpu1", [20] * 1001)
              + series("GPUUtilization", "gpu0", [90] * 1001, node="algo-2"))
    fired, rule = run(LowGPUUtilization, system)
    assert fired and rule.report["Violations"] == 1
    assert list(rule.report["Details"]["algo-1"]) == ["gpu1"] and "algo-2" not in rule.report["Details"]


# --- CPUBottleneck / IOBottleneck --------------------------------------------------------------------

def _snapshots(n, gpu, other_dimension, other, *, share=1.0):
    """n snapshots 0.1 s apart: a GPU record at t and a record of the other metric 1 ms later; the first
    ``share`` of the snapshots use ``gpu``/``other``, the rest a busy GPU and an idle CPU."""
    k = int(n * share)
    gpus = [gpu] * k + [90] * (n - k)
    others = [other] * k + [10] * (n - k)
    return series("GPUUtilization", "gpu0", gpus) + series(other_dimension, "cpu0", others, offset=0.001)


@pytest.mark.parametrize(("gpu", "cpu", "share", "fires"), [
    (5, 95, 1.0, True), (5, 50, 1.0, False), (5, 95, 0.4, False), (5, 95, 0.6, True), (50, 95, 1.0, False),
])
def test_cpu_bottleneck(gpu, cpu, share, fires):
    fired, rule = run(CPUBottleneck, _snapshots(1101, gpu, "CPUUtilization", cpu, share=share))
    assert fired is fires
    assert rule.report["Datapoints"] == 1101
    assert rule.report["Violations"] == (int(1101 * share) if cpu > 90 and gpu < 10 else 0)


def test_cpu_bottleneck_needs_more_than_patience_snapshots():
    assert run(CPUBottleneck, _snapshots(1000, 5, "CPUUtilization", 95))[0] is False
    assert run(CPUBottleneck, _snapshots(1001, 5, "CPUUtilization", 95))[0] is True


def test_cpu_bottleneck_details_name_the_work_running_at_the_bottlenecks():
    system = _snapshots(1101, 5, "CPUUtilization", 95)
    framework = [FwEvent(us(T0 - 1), us(T0 + 200), "conv2d", "cpu_functions"),
                 FwEvent(us(T0 - 1), us(T0 + 200), "gemm", "gpu_functions")]
    fired, rule = run(CPUBottleneck, system, framework)
    details = rule.report["Details"]
    assert fired and details["CPU"] == {"conv2d": 100.0} and details["GPU"] == {"gemm": 100.0}
    assert details["low_gpu_utilization"] == 1101 and len(details["bottlenecks"]) == 1101
    first = details["bottlenecks"][min(details["bottlenecks"])]
    assert first == {"GPUs": 1, "CPUs": 1}


def test_cpu_bottleneck_without_a_gpu_checks_nothing_and_says_so():
    fired, rule = run(CPUBottleneck, series("CPUUtilization", "cpu0", [100] * 2000))
    assert not fired
    assert "GPUUtilization" in rule.coverage_note()


@pytest.mark.parametrize(("iowait", "fires"), [(60, True), (10, False)])
def test_io_bottleneck(iowait, fires):
    fired, rule = run(IOBottleneck, _snapshots(1101, 5, "I/OWaitPercentage", iowait))
    assert fired is fires
    assert rule.coverage_note() is None


# --- GPUMemoryIncrease --------------------------------------------------------------------------------

def _memory(jump_at, low, high, total=1020):
    return series("GPUMemoryUtilization", "gpu0", [low] * jump_at + [high] * (total - jump_at))


@pytest.mark.parametrize(("values", "fires"), [
    (_memory(1005, 10, 50), True),
    (_memory(1005, 10, 30), False),           # a jump of 20 moves the difference by about 4 < 5
    (_memory(500, 10, 50), False),            # before patience
    (series("GPUMemoryUtilization", "gpu0", np.minimum(10 + 0.05 * np.arange(1020), 55)), False),  # a ramp
])
def test_gpu_memory_increase(values, fires):
    fired, rule = run(GPUMemoryIncrease, values)
    assert fired is fires
    if fires:
        assert rule.report["Details"]["algo-1"]["gpu0"]["increase"] > 5


def test_gpu_memory_increase_counts_each_sample_across_windows_once():
    data = _memory(1005, 10, 50)
    rule = GPUMemoryIncrease(FakeProfilerData(data))
    half = len(data) // 2
    rule.invoke_for_timerange(*WHOLE, data[:half], [])
    assert not rule.triggered
    rule.invoke_for_timerange(*WHOLE, data[half:], [])
    one_window = run(GPUMemoryIncrease, data)[1]
    assert rule.report["Violations"] == one_window.report["Violations"] > 0


# --- BatchSize ----------------------------------------------------------------------------------------

def _batch(cpu, gpu, memory, n=1001):
    return (series("CPUUtilization", "cpu0", [cpu] * n) + series("CPUUtilization", "cpu1", [cpu] * n)
            + series("GPUUtilization", "gpu0", [gpu] * n) + series("GPUMemoryUtilization", "gpu0", [memory] * n))


@pytest.mark.parametrize(("cpu", "gpu", "memory", "fires"), [
    (20, 20, 20, True), (20, 90, 20, False), (90, 20, 20, False), (20, 20, 90, False),
])
def test_batch_size(cpu, gpu, memory, fires):
    fired, rule = run(BatchSize, _batch(cpu, gpu, memory))
    assert fired is fires
    if fires:
        assert rule.report["Details"]["algo-1"]["cpu"]["p50"] == pytest.approx(cpu)
        assert set(rule.report["Details"]["algo-1"]) == {"cpu", "gpu0", "gpu0_memory"}


# --- LoadBalancing ------------------------------------------------------------------------------------

def test_load_balancing_compares_every_pair_and_fires_on_unequal_gpus():
    fired, rule = run(LoadBalancing, series("GPUUtilization", "gpu0", [90] * 1001)
                      + series("GPUUtilization", "gpu1", [10] * 1001))
    assert fired  # the 2020 code compared the last GPU with itself and never fired here
    assert rule.report["Details"]["algo-1"]["distances"]["gpu0"]["gpu1"] == pytest.approx(np.sqrt(np.log(2)))


def test_load_balancing_quiet_on_similar_gpus():
    rng = np.random.default_rng(0)
    fired, rule = run(LoadBalancing, series("GPUUtilization", "gpu0", rng.normal(50, 5, 1001))
                      + series("GPUUtilization", "gpu1", rng.normal(55, 5, 1001)))
    assert not fired and len(rule.report["Details"]["algo-1"]["workloads"]["gpu0"]) == 50


def test_load_balancing_counts_a_fully_busy_gpu():
    # the 2020 bins ended at 98: a GPU at 100% had an empty histogram, and the distance was NaN
    fired, _ = run(LoadBalancing, series("GPUUtilization", "gpu0", [100] * 1001)
                   + series("GPUUtilization", "gpu1", [10] * 1001))
    assert fired


def test_load_balancing_with_one_gpu_checks_nothing():
    fired, rule = run(LoadBalancing, series("GPUUtilization", "gpu0", [10] * 1001))
    assert not fired and "two or more GPUs" in rule.coverage_note()


# --- MaxInitializationTime ----------------------------------------------------------------------------

def _minutes(m):
    return series("CPUUtilization", "cpu0", [50] * (m * 60 + 1), every=1.0)


@pytest.mark.parametrize(("minutes", "with_step", "fires"), [(21, False, True), (21, True, False), (19, False, False)])
def test_max_initialization_time(minutes, with_step, fires):
    framework = steps([0.1], start=T0 + 60) if with_step else []
    fired, rule = run(MaxInitializationTime, _minutes(minutes), framework)
    assert fired is fires
    if with_step:
        assert rule.report["Details"]["step_num"]["first"] == pytest.approx((T0 + 60) * 1e6)
    assert rule.report["Details"]["job_end"] - rule.report["Details"]["job_start"] == pytest.approx(minutes * 60)


# --- StepOutlier --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("durations", "fires"), [
    ([0.1] * 200 + [5.0] * 12, True),
    ([0.1] * 200 + [5.0] * 5, False),   # not more than n_outliers
    ([0.1] * 50 + [5.0] * 20, False),   # not more than 100 steps
])
def test_step_outlier(durations, fires):
    fired, rule = run(StepOutlier, framework=steps(durations))
    assert fired is fires
    assert rule.report["Datapoints"] == len(durations)
    if len(durations) > 100:
        details = rule.report["Details"]["step_details"]["algo-1"]
        assert details["number_of_outliers"] == durations.count(5.0)
        assert details["step_numbers"] == [i for i, d in enumerate(durations) if d == 5.0]
        assert details["phase"] == "Step:ModeKeys.TRAIN"


def test_step_outlier_mode_keeps_only_that_modes_steps():
    framework = steps([0.1] * 200 + [5.0] * 12, mode="EVAL") + steps([0.1] * 200, mode="TRAIN", start=T0 + 500)
    assert run(StepOutlier, framework=framework)[0] is True
    assert run(StepOutlier, framework=framework, mode="TRAIN")[0] is False
    assert run(StepOutlier, framework=framework, mode="ModeKeys.EVAL")[0] is True
    assert run(StepOutlier, framework=framework, mode="None")[0] is True  # what rulesconfig sends for no mode


# --- Dataloader ---------------------------------------------------------------------------------------

def _dataloader(pids_per_second, seconds=20, cores=8):
    system = [e for c in range(cores) for e in series("CPUUtilization", f"cpu{c}", [50] * 10)]
    framework = [FwEvent(us(T0 + s + 0.01 * p), us(T0 + s + 0.01 * p + 0.005), "worker", "DataLoaderWorker",
                         event_args={"pid": 1000 + p}) for s in range(seconds) for p in range(pids_per_second)]
    return system, framework


@pytest.mark.parametrize(("pids", "fires"), [(1, True), (8, False), (20, True)])
def test_dataloader(pids, fires):
    fired, rule = run(Dataloader, *_dataloader(pids))
    assert fired is fires
    assert rule.report["Details"]["cores"] == 8 and rule.report["Details"]["dataloaders"] == pids


def test_dataloader_without_cpu_metrics_judges_nothing():
    _, framework = _dataloader(1)
    fired, rule = run(Dataloader, [], framework)
    assert not fired and rule.coverage_note() is not None


# --- OverallSystemUsage -------------------------------------------------------------------------------

def test_overall_system_usage_never_fires_and_reports_per_node_percentiles():
    system = (series("CPUUtilization", "cpu0", [100] * 10) + series("CPUUtilization", "cpu1", [0] * 10)
              + series("GPUUtilization", "gpu0", [40] * 10) + series("MemoryUsedPercent", "MemoryUsedPercent",
                                                                     [30] * 10)
              + series("Algorithm", "eth0_rx", [1e6] * 10))
    fired, rule = run(OverallSystemUsage, system)
    details = rule.report["Details"]
    assert not fired
    assert details["CPU"]["algo-1"] == {"max": 50.0, "p99": 50.0, "p95": 50.0, "p50": 50.0, "min": 50.0}
    assert details["GPU"]["algo-1"]["p50"] == 40.0 and details["CPU memory"]["algo-1"]["max"] == 30.0
    assert details["Network"]["algo-1"]["p50"] == 1e6
    assert rule.report["Datapoints"] == 10


# --- shared behaviour ---------------------------------------------------------------------------------

def test_once_fired_a_rule_reports_fired_for_every_later_window():
    rule = LowGPUUtilization(FakeProfilerData([]))
    assert rule.invoke_for_timerange(*WHOLE, series("GPUUtilization", "gpu0", [10] * 1001), [])
    assert rule.invoke_for_timerange(*WHOLE, [], [])  # smdebug's RuleTriggered is cumulative


def test_parameters_arrive_as_strings_and_bad_ones_are_named():
    from sdk_ext.exceptions import ConfigError

    rule = LowGPUUtilization(FakeProfilerData([]), threshold_p95="50", window="10", patience="0",
                             scan_interval_us="1000000")
    assert (rule.threshold_p95, rule.window, rule.patience, rule.scan_interval_us) == (50.0, 10, 0, 1_000_000)
    assert rule.report["RuleParameters"] == "threshold_p95:50\nthreshold_p5:10\nwindow:10\npatience:0"
    with pytest.raises(ConfigError) as err:
        LowGPUUtilization(FakeProfilerData([]), window="ten", scan_interval_us="0")
    assert "scan_interval_us='0'" in str(err.value) and "window='ten'" in str(err.value)
