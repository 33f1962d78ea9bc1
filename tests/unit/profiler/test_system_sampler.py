"""What the system monitor samples: SageMaker's vocabulary, values in range, every core, rates over the
interval, each GPU through NVML, and no GPU as a quiet "no GPU"."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from sdk_ext.profiler.gpu import NvmlGpus
from sdk_ext.profiler.system_sampler import SystemSampler
from tests.unit.profiler.fake_nvml import FakeNvml, NVMLError


class FakePsutil:
    """Counters that move by known amounts between samples."""

    def __init__(self, *, disks: bool = True, nics: bool = True) -> None:
        self.tick = 0
        self.disks, self.nics = disks, nics

    def cpu_count(self, logical: bool = True) -> int:
        return 2

    def cpu_times_percent(self, percpu: bool = False) -> list[Any]:
        return [SimpleNamespace(idle=70.0, iowait=10.0), SimpleNamespace(idle=0.0, iowait=0.0)]

    def virtual_memory(self) -> Any:
        return SimpleNamespace(percent=42.5)

    def disk_io_counters(self, perdisk: bool = False) -> Any:
        if not self.disks:
            return None
        n = self.tick
        return SimpleNamespace(read_count=10 * n, write_count=5 * n, read_bytes=4096 * n, write_bytes=1024 * n)

    def net_io_counters(self, pernic: bool = False) -> Any:
        if not self.nics:
            return {}
        n = self.tick
        return {"lo": SimpleNamespace(bytes_recv=10**9 * n, bytes_sent=10**9 * n),
                "eth0": SimpleNamespace(bytes_recv=1000 * n, bytes_sent=100 * n),
                "eth1": SimpleNamespace(bytes_recv=500 * n, bytes_sent=50 * n)}


def _by_key(metrics: list[Any]) -> dict[tuple[str, str, str], float]:
    return {(m.type, m.name, m.dimension): m.value for m in metrics}


def test_each_core_memory_disk_and_network_in_sagemakers_vocabulary_with_rates_per_second() -> None:
    fake = FakePsutil()
    clock = iter([100.0, 100.5])
    sampler = SystemSampler(psutil_module=fake, monotonic=lambda: next(clock), clock=lambda: 1591160699.5)
    sampler.start()
    fake.tick = 1  # half a second later
    got = _by_key(sampler.sample())
    assert got[("cpu", "cpu0", "CPUUtilization")] == 20.0  # neither idle nor waiting for I/O
    assert got[("cpu", "cpu0", "I/OWaitPercentage")] == 10.0
    assert got[("cpu", "cpu1", "CPUUtilization")] == 100.0
    assert got[("memory", "MemoryUsedPercent", "")] == 42.5
    assert got[("i/o", "IOPS", "")] == 30.0
    assert got[("i/o", "ReadThroughputInBytesPerSecond", "")] == 8192.0
    assert got[("i/o", "WriteThroughputInBytesPerSecond", "")] == 2048.0
    assert got[("network", "ReceiveBytesPerSecond", "Algorithm")] == 3000.0  # loopback left out
    assert got[("network", "TransmitBytesPerSecond", "Algorithm")] == 300.0
    assert not any(t == "gpu" for t, _, _ in got)


def test_a_host_without_disk_or_network_counters_writes_neither() -> None:
    sampler = SystemSampler(psutil_module=FakePsutil(disks=False, nics=False))
    sampler.start()
    types = {m.type for m in sampler.sample()}
    assert types == {"cpu", "memory"}


def test_this_machine_every_core_sampled_values_in_range() -> None:
    sampler = SystemSampler()
    sampler.start()
    sum(i * i for i in range(200_000))  # some CPU time between the samples
    metrics = sampler.sample()
    cores = {m.name for m in metrics if m.dimension == "CPUUtilization"}
    assert cores == {f"cpu{i}" for i in range(psutil.cpu_count(logical=True))}
    assert all(0.0 <= m.value <= 100.0 for m in metrics if m.type in ("cpu", "memory"))
    assert all(m.value >= 0.0 for m in metrics)


def test_fake_nvml_proves_the_gpu_path_utilization_and_memory_percent_per_gpu() -> None:
    nvml = FakeNvml(gpus=[(87.0, 3 * 2**30, 16 * 2**30), (5.0, 0, 16 * 2**30)])
    gpus = NvmlGpus.open(nvml)
    assert gpus is not None and gpus.count == 2
    sampler = SystemSampler(psutil_module=FakePsutil(), gpus=gpus)
    sampler.start()
    got = _by_key(sampler.sample())
    assert got[("gpu", "gpu0", "GPUUtilization")] == 87.0
    assert got[("gpu", "gpu0", "GPUMemoryUtilization")] == pytest.approx(18.75)
    assert got[("gpu", "gpu1", "GPUUtilization")] == 5.0
    assert got[("gpu", "gpu1", "GPUMemoryUtilization")] == 0.0
    sampler.close()
    assert nvml.calls == ["init", "shutdown"]


def test_a_lost_gpu_is_skipped_with_one_warning_and_the_others_go_on(caplog: pytest.LogCaptureFixture) -> None:
    nvml = FakeNvml(gpus=[(50.0, 1, 2), (60.0, 1, 2)], lost={0})
    gpus = NvmlGpus.open(nvml)
    assert gpus is not None
    with caplog.at_level(logging.WARNING):
        first, second = gpus.sample(), gpus.sample()
    assert [g.index for g in first] == [1] and [g.index for g in second] == [1]
    assert caplog.text.count("GPU 0 stopped answering") == 1


@pytest.mark.parametrize("nvml", [FakeNvml(init_error=NVMLError("NVML Shared Library Not Found")),
                                  FakeNvml(init_error=NVMLError("Driver Not Loaded")), FakeNvml(gpus=[])],
                         ids=["no library", "no driver", "no GPU"])
def test_no_gpu_is_quiet_never_an_error(nvml: FakeNvml, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        assert NvmlGpus.open(nvml) is None
    assert "no GPU" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_no_pynvml_installed_is_quiet(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with caplog.at_level(logging.INFO):
        assert NvmlGpus.open() is None
    assert "nvidia-ml-py" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_this_machine_without_a_gpu_samples_without_gpu_records() -> None:
    gpus = NvmlGpus.open()  # the real pynvml on a machine with no NVIDIA driver: None
    if gpus is not None:
        pytest.skip("this machine has a GPU")
    sampler = SystemSampler(gpus=gpus)
    sampler.start()
    assert not [m for m in sampler.sample() if m.type == "gpu"]
