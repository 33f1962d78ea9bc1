"""The system monitor: samples one host at the job's ProfilingIntervalInMilliseconds into
``profiler-output/system/`` (layout and atomicity: :mod:`sdk_ext.profiler.system_files`; what is
sampled: :mod:`sdk_ext.profiler.system_sampler`).

A local job runs one per emulated host as a child process::

    python -m sdk_ext.profiler.monitor --out JOB/profiler-output --host algo-1 \\
        --config JOB/input/config/profilerconfig.json

With ``--config`` the monitor follows that file while it runs (UpdateTrainingJob rewrites it): a new
``ProfilingIntervalInMilliseconds`` applies from the next sample, ``DisableProfiler: true`` pauses
sampling (the current file is published) until profiling is enabled again. SIGTERM, SIGINT or the
parent's death end it after publishing the current file. In Python::

    monitor = SystemMonitor(out_dir, node_id="algo-2", interval_ms=100)
    thread = threading.Thread(target=monitor.run, args=(stop_event,)); thread.start()
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from sdk_ext.profiler import config as profiler_config
from sdk_ext.profiler.gpu import NvmlGpus
from sdk_ext.profiler.system_files import PERIOD_SECONDS_DEFAULT, SystemMetricsWriter, recover
from sdk_ext.profiler.system_sampler import SystemSampler

logger = logging.getLogger(__name__)

CONFIG_POLL_SECONDS = 1.0  # how often a monitor that follows a config file looks at it


class SystemMonitor:
    """Samples one host into ``out_dir`` until stopped.

    Args:
        out_dir: the job's ``profiler-output/`` directory.
        node_id: the host, ``algo-N``.
        interval_ms: the sampling interval (ProfilingIntervalInMilliseconds), when no ``config_path``.
        config_path: a profilerconfig.json to follow (interval, enabled) while running.
        period: seconds per system metric file.
        sampler: what samples (default: psutil and NVML on this machine).

    Raises:
        ValueError: a host name that is not ``algo-N``, or an interval that is not positive.
    """

    def __init__(self, out_dir: str | os.PathLike[str], *, node_id: str = "algo-1", interval_ms: int = 500,
                 config_path: str | os.PathLike[str] | None = None, period: float = PERIOD_SECONDS_DEFAULT,
                 sampler: SystemSampler | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be positive, got {interval_ms!r}")
        self.writer = SystemMetricsWriter(out_dir, node_id, period=period)
        self.node_id = node_id
        self.interval_ms = interval_ms
        self.enabled = True
        self.config_path = Path(config_path) if config_path is not None else None
        self._config = (profiler_config.ConfigFollower(self.config_path, first_counts=True)
                        if self.config_path is not None else None)
        self._sampler = sampler
        self._monotonic = monotonic
        #: samples written so far
        self.samples = 0

    def _follow_config(self) -> None:
        """Re-read the config file when it changed (a missing file changes nothing)."""
        if self._config is None or not self._config.changed():
            return
        settings = profiler_config.load(self._config.path)
        if settings.enabled != self.enabled or (settings.enabled and settings.interval_ms != self.interval_ms):
            logger.info("monitor %s: profiling %s%s", self.node_id, "enabled" if settings.enabled else "disabled",
                        f", every {settings.interval_ms} ms" if settings.enabled else "")
        if not settings.enabled and self.enabled:
            self.writer.rotate()
        self.enabled = settings.enabled
        if settings.enabled:
            self.interval_ms = settings.interval_ms

    def sample_once(self) -> None:
        """Take one sample and append it."""
        if self._sampler is None:
            self._sampler = SystemSampler(gpus=NvmlGpus.open())
            self._sampler.start()
        self.writer.write(self._sampler.sample())
        self.samples += 1

    def run(self, stop: threading.Event, *, still_wanted: Callable[[], bool] = lambda: True) -> None:
        """Sample at the interval until ``stop`` is set or ``still_wanted()`` is False, then :meth:`close`."""
        try:
            recover(self.writer.out_dir, self.node_id)  # what an earlier, killed monitor of this host left
            self._follow_config()
            if self._sampler is None:
                self._sampler = SystemSampler(gpus=NvmlGpus.open())
            self._sampler.start()
            next_sample = self._monotonic() + self.interval_ms / 1000.0
            next_config = self._monotonic() + CONFIG_POLL_SECONDS
            while not stop.is_set() and still_wanted():
                now = self._monotonic()
                if now >= next_config:
                    self._follow_config()
                    next_config = now + CONFIG_POLL_SECONDS
                if now >= next_sample:
                    if self.enabled:
                        self.sample_once()
                    interval = self.interval_ms / 1000.0
                    # on schedule; after a stall (or a long pause) start again from now, never in a burst
                    next_sample = next_sample + interval if now - next_sample < interval else now + interval
                stop.wait(max(0.0, min(next_sample, next_config) - self._monotonic()))
        finally:
            self.close()

    def close(self) -> None:
        """Publish the current file and let the GPUs go. Safe to call twice."""
        self.writer.close()
        if self._sampler is not None:
            self._sampler.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sdk_ext.profiler.monitor``: one host's monitor until SIGTERM or the parent's end."""
    parser = argparse.ArgumentParser(prog="python -m sdk_ext.profiler.monitor", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the job's profiler-output directory")
    parser.add_argument("--host", default="algo-1", help="the host name, algo-N (default algo-1)")
    parser.add_argument("--interval-ms", type=int, default=None,
                        help="sampling interval in ms (default: the config's, else 500)")
    parser.add_argument("--config", default=None, help="profilerconfig.json to follow while running")
    parser.add_argument("--period", type=float, default=PERIOD_SECONDS_DEFAULT, help="seconds per file (60)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    interval = args.interval_ms
    if interval is None:
        interval = profiler_config.load(args.config).interval_ms if args.config else profiler_config.INTERVAL_MS_DEFAULT
    try:
        monitor = SystemMonitor(args.out, node_id=args.host, interval_ms=interval, config_path=args.config,
                                period=args.period)
    except ValueError as err:
        print(f"monitor: {err}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    parent = os.getppid()
    try:
        monitor.run(stop, still_wanted=lambda: os.getppid() == parent)  # the parent's end ends the monitor too
    except RuntimeError as err:  # psutil missing: say how to install it, without a traceback
        print(f"monitor: {err}", file=sys.stderr)
        return 1
    logger.info("monitor %s: %d samples, %d files", args.host, monitor.samples, len(monitor.writer.published))
    return 0


if __name__ == "__main__":
    sys.exit(main())
