"""Each NVIDIA GPU's utilization and memory, through NVML (nvidia-ml-py, imported as ``pynvml``).

No pynvml, no driver, no GPU: :meth:`NvmlGpus.open` returns None and says so once at INFO level
("no GPU"), never an error. A GPU that stops answering later is skipped with one warning.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU at one time: percent of time a kernel ran, and percent of its memory in use."""

    index: int
    utilization: float
    memory_used_percent: float


def _import_nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


class NvmlGpus:
    """The GPUs NVML sees. Build with :meth:`open`; :meth:`close` when done."""

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self._handles = handles
        self._failed: set[int] = set()

    @classmethod
    def open(cls, nvml: Any = None) -> NvmlGpus | None:
        """The GPUs of this machine, or None when there are none to sample (no pynvml, driver or GPU).

        Args:
            nvml: an NVML module (tests pass a fake); default ``pynvml``.
        """
        module = nvml if nvml is not None else _import_nvml()
        if module is None:
            logger.info("no GPU: nvidia-ml-py (pynvml) is not installed; GPUs are not sampled")
            return None
        try:
            module.nvmlInit()
        except Exception as err:  # noqa: BLE001 - NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no GPU
            logger.info("no GPU: NVML did not start (%s); GPUs are not sampled", err)
            return None
        try:
            count = int(module.nvmlDeviceGetCount())
            handles = [module.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as err:  # noqa: BLE001 - a driver that cannot list devices: no GPU
            logger.info("no GPU: NVML lists no device (%s); GPUs are not sampled", err)
            _shutdown(module)
            return None
        if not handles:
            logger.info("no GPU: NVML found none; GPUs are not sampled")
            _shutdown(module)
            return None
        logger.info("sampling %d GPU(s) through NVML", len(handles))
        return cls(module, handles)

    @property
    def count(self) -> int:
        return len(self._handles)

    def sample(self) -> list[GpuSample]:
        """Each answering GPU's utilization and memory use now."""
        samples = []
        for index, handle in enumerate(self._handles):
            if index in self._failed:
                continue
            try:
                rates = self._nvml.nvmlDeviceGetUtilizationRates(handle)
                memory = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            except Exception as err:  # noqa: BLE001 - e.g. GPU lost: stop asking it, keep the others
                self._failed.add(index)
                logger.warning("GPU %d stopped answering NVML (%s); it is no longer sampled", index, err)
                continue
            total = float(memory.total) or 1.0
            samples.append(GpuSample(index, float(rates.gpu), 100.0 * float(memory.used) / total))
        return samples

    def close(self) -> None:
        _shutdown(self._nvml)


def _shutdown(module: Any) -> None:
    try:
        module.nvmlShutdown()
    except Exception:  # noqa: BLE001, S110 - shutting down a library that may be half-initialized
        logger.debug("nvmlShutdown failed", exc_info=True)


__all__ = ["GpuSample", "NvmlGpus"]
