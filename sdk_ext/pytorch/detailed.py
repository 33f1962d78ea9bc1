"""FrameworkProfile's detailed profiling on PyTorch: ``torch.profiler`` over a window of steps.

The window is the job's ``DetailedProfilingConfig`` (StartStep, NumSteps; global steps). The profiler
starts when the window's first step starts and stops when the first step after it starts (or the hook
closes). Its trace is kept beside the step timeline, as torch writes it (Chrome trace; Perfetto,
chrome://tracing and TensorBoard's PyTorch profiler plugin open it)::

    framework/pytorch/detailed_profiling/<YYYYMMDDHH>/<start step, 9 digits>/<node>.pt.trace.json

written under a hidden name and renamed when complete. smdebug's readers skip it (they read
``framework/pevents/`` and TensorFlow's traces only).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import torch

from sdk_ext.profiler.config import StepWindow
from sdk_ext.profiler.timeline import FRAMEWORK_DIR, Step

logger = logging.getLogger(__name__)


class TorchProfilerWindow:
    """Runs torch.profiler over ``window`` and writes its trace under ``out_dir`` (a StepObserver)."""

    def __init__(self, window: StepWindow, out_dir: Path, node: str) -> None:
        self.window = window
        self.out_dir = out_dir
        self.node = node
        self._profiler: Any = None
        self._first_step = -1
        self._done = False
        #: the trace written, once the window has ended
        self.trace: Path | None = None

    def step_started(self, step: Step) -> None:
        if self._done:
            return
        inside = self.window.covers(step.global_step)
        if self._profiler is None and inside:
            self._start(step.global_step)
        elif self._profiler is not None and not inside:
            self.close()

    def _start(self, global_step: int) -> None:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        try:
            self._profiler = torch.profiler.profile(activities=activities, record_shapes=True)
            self._profiler.__enter__()
        except Exception:  # noqa: BLE001 - e.g. another profiler is running: skip the window, train on
            logger.exception("detailed profiling: torch.profiler did not start at step %d; no detailed trace",
                             global_step)
            self._profiler = None
            self._done = True
            return
        self._first_step = global_step
        logger.info("detailed profiling: torch.profiler on from step %d for %d step(s)", global_step,
                    self.window.num_steps)

    def close(self) -> None:
        """Stop the profiler (if on) and write its trace. Never raises."""
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        self._done = True
        try:
            profiler.__exit__(None, None, None)
            directory = (self.out_dir / FRAMEWORK_DIR / "pytorch" / "detailed_profiling"
                         / time.strftime("%Y%m%d%H", time.gmtime()) / f"{self._first_step:09d}")
            directory.mkdir(parents=True, exist_ok=True)
            tmp = directory / f".{self.node}.pt.trace.json.tmp"
            profiler.export_chrome_trace(str(tmp))
            target = directory / f"{self.node}.pt.trace.json"
            os.replace(tmp, target)
            self.trace = target
            logger.info("detailed profiling: trace of steps %d-%d in %s", self._first_step,
                        self._first_step + self.window.num_steps - 1, target)
        except Exception:  # noqa: BLE001 - a failed export must not reach training
            logger.exception("detailed profiling: the torch.profiler trace could not be written")


__all__ = ["TorchProfilerWindow"]
