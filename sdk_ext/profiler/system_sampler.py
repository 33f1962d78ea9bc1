"""One host's system metrics at one time, in SageMaker's vocabulary, sampled by psutil and NVML.

What one :meth:`SystemSampler.sample` returns (``Type`` / ``Name`` / ``Dimension``, as SageMaker's own
profiler writes them in a job's ``profiler-output/system/``):

=======  ==================================  ====================  ===============================
Type     Name                                Dimension             Value
=======  ==================================  ====================  ===============================
cpu      cpu0, cpu1, ... (each logical core) CPUUtilization        percent busy (not idle, not iowait)
cpu      cpu0, cpu1, ...                     I/OWaitPercentage     percent of time waiting for I/O
memory   MemoryUsedPercent                   (empty)               percent of memory in use
i/o      IOPS                                (empty)               reads + writes per second, all disks
i/o      ReadThroughputInBytesPerSecond      (empty)               bytes read per second
i/o      WriteThroughputInBytesPerSecond     (empty)               bytes written per second
network  ReceiveBytesPerSecond               Algorithm             bytes received per second (no loopback)
network  TransmitBytesPerSecond              Algorithm             bytes sent per second (no loopback)
gpu      gpu0, gpu1, ... (each NVIDIA GPU)   GPUUtilization        percent of time a kernel ran
gpu      gpu0, gpu1, ...                     GPUMemoryUtilization  percent of the GPU's memory in use
=======  ==================================  ====================  ===============================

Rates and percentages are over the time since the previous sample (the first sample, right after
:meth:`SystemSampler.start`, covers the time since then). A host without disk or network counters
(some containers) writes no i/o or network records; a host without a GPU no gpu records.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sdk_ext.profiler.gpu import NvmlGpus


@dataclass(frozen=True, slots=True)
class SystemMetric:
    """One record of ``profiler-output/system/``."""

    type: str
    name: str
    dimension: str
    value: float
    timestamp: float  # seconds since the epoch


@dataclass(slots=True)
class _Counters:
    time: float
    disk: tuple[int, int, int] | None  # operations, bytes read, bytes written
    net: tuple[int, int] | None  # bytes received, bytes sent


def _import_psutil() -> Any:
    try:
        import psutil
    except ImportError as err:
        raise RuntimeError("the system monitor needs psutil: pip install 'sdk-ext[profiler]'") from err
    return psutil


class SystemSampler:
    """Samples this host. Call :meth:`start` once, then :meth:`sample` at each interval.

    Args:
        gpus: the GPUs to sample (``NvmlGpus.open()``), or None for none.
        psutil_module: psutil (tests may pass a fake).
        clock: wall time for the records' timestamps.
        monotonic: the clock rates are computed over.
    """

    def __init__(self, *, gpus: NvmlGpus | None = None, psutil_module: Any = None,
                 clock: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._psutil = psutil_module
        self._gpus = gpus
        self._clock = clock
        self._monotonic = monotonic
        self._last: _Counters | None = None

    @property
    def cpu_count(self) -> int:
        return int(self._ps().cpu_count(logical=True) or 1)

    def _ps(self) -> Any:
        if self._psutil is None:
            self._psutil = _import_psutil()
        return self._psutil

    def start(self) -> None:
        """Take the baseline the first sample's rates and percentages are computed from."""
        ps = self._ps()
        ps.cpu_times_percent(percpu=True)  # psutil keeps the baseline of the next call
        self._last = self._counters()

    def _counters(self) -> _Counters:
        ps = self._ps()
        disk = ps.disk_io_counters(perdisk=False)
        nics = ps.net_io_counters(pernic=True) or {}
        external = [c for name, c in nics.items() if name != "lo" and not name.startswith("lo:")]
        return _Counters(
            time=self._monotonic(),
            disk=(int(disk.read_count + disk.write_count), int(disk.read_bytes), int(disk.write_bytes))
            if disk is not None else None,
            net=(sum(int(c.bytes_recv) for c in external), sum(int(c.bytes_sent) for c in external))
            if external else None,
        )

    def sample(self) -> list[SystemMetric]:
        """Every metric of the table above, now."""
        if self._last is None:
            self.start()
        ps = self._ps()
        metrics: list[SystemMetric] = []
        now = self._clock()
        for i, cpu in enumerate(ps.cpu_times_percent(percpu=True)):
            iowait = float(getattr(cpu, "iowait", 0.0))
            busy = min(100.0, max(0.0, 100.0 - float(cpu.idle) - iowait))
            metrics.append(SystemMetric("cpu", f"cpu{i}", "CPUUtilization", busy, now))
            metrics.append(SystemMetric("cpu", f"cpu{i}", "I/OWaitPercentage", iowait, now))
        metrics.append(SystemMetric("memory", "MemoryUsedPercent", "", float(ps.virtual_memory().percent),
                                    self._clock()))
        last, current = self._last, self._counters()
        assert last is not None
        self._last = current
        elapsed = current.time - last.time
        now = self._clock()
        if elapsed > 0 and current.disk is not None and last.disk is not None:
            ops, read, written = (max(0, c - p) / elapsed for c, p in zip(current.disk, last.disk))
            metrics += [SystemMetric("i/o", "IOPS", "", ops, now),
                        SystemMetric("i/o", "ReadThroughputInBytesPerSecond", "", read, now),
                        SystemMetric("i/o", "WriteThroughputInBytesPerSecond", "", written, now)]
        if elapsed > 0 and current.net is not None and last.net is not None:
            received, sent = (max(0, c - p) / elapsed for c, p in zip(current.net, last.net))
            metrics += [SystemMetric("network", "ReceiveBytesPerSecond", "Algorithm", received, now),
                        SystemMetric("network", "TransmitBytesPerSecond", "Algorithm", sent, now)]
        if self._gpus is not None:
            now = self._clock()
            for gpu in self._gpus.sample():
                metrics.append(SystemMetric("gpu", f"gpu{gpu.index}", "GPUUtilization", gpu.utilization, now))
                metrics.append(SystemMetric("gpu", f"gpu{gpu.index}", "GPUMemoryUtilization",
                                            gpu.memory_used_percent, now))
        return metrics

    def close(self) -> None:
        if self._gpus is not None:
            self._gpus.close()
            self._gpus = None


__all__ = ["SystemMetric", "SystemSampler"]
