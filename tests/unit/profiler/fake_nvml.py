"""A stand-in for nvidia-ml-py's ``pynvml`` module: the calls the GPU sampler makes, on made-up GPUs."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    pass


@dataclass
class FakeNvml:
    """``gpus``: (utilization percent, memory used, memory total) per GPU; ``init_error``: what nvmlInit raises."""

    gpus: list[tuple[float, int, int]] = field(default_factory=list)
    init_error: Exception | None = None
    lost: set[int] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        if handle in self.lost:
            raise NVMLError("GPU is lost")
        return SimpleNamespace(gpu=self.gpus[handle][0], memory=3)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        _, used, total = self.gpus[handle]
        return SimpleNamespace(used=used, total=total, free=total - used)
