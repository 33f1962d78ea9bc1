"""System metric files as SageMaker lays them out, written so that a reader never sees a torn line.

Layout under a job's ``profiler-output/`` (one file per host per period, 60 s as SageMaker's)::

    system/incremental/2020060500/1591160640.algo-1.json    period start (UTC epoch seconds), host
    system/training_job_end.ts                              when training has ended

Each line is one JSON object (:func:`encode`)::

    {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 4.76, "NodeId": "algo-1", "Timestamp": 1591160699.457089}

Atomicity: the current period's lines are appended, one ``write`` per sample, to a hidden file
``system/.<period>.<host>.tmp`` (no reader lists it: its name has no ``.json`` and no
``incremental/<hour>/`` directory). When the period ends (or the monitor closes) the file is renamed
into ``incremental/<hour>/``: a complete file appears at once, or nothing. A monitor killed mid-period
leaves the hidden file; :func:`recover` (the next monitor, or the job runner once the monitor is gone)
keeps its complete lines and renames it into place, so only a sample being written at the kill is lost.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path

from sdk_ext.profiler.system_sampler import SystemMetric

logger = logging.getLogger(__name__)

SYSTEM_DIR = "system"
INCREMENTAL_DIR = "incremental"
END_MARKER = "training_job_end.ts"
PERIOD_SECONDS_DEFAULT = 60.0
_NODE_ID = re.compile(r"algo-\d+")
_PARTIAL = re.compile(r"\.(\d{10})\.(algo-\d+)\.tmp")


def check_node_id(node_id: str) -> str:
    """``algo-N``: the only host names smdebug's readers accept in system file names."""
    if not _NODE_ID.fullmatch(node_id):
        raise ValueError(f"host name {node_id!r}: system metric files need SageMaker's form 'algo-N' (e.g. "
                         "'algo-1'), which smdebug's readers look for in file names")
    return node_id


def encode(metric: SystemMetric, node_id: str) -> str:
    """One line (with its newline). Values keep 2 decimals, timestamps microseconds, as SageMaker's."""
    value = round(metric.value, 2)
    if not math.isfinite(value):
        value = 0.0
    return (f'{{"Type": {json.dumps(metric.type)}, "Name": {json.dumps(metric.name)}, '
            f'"Dimension": {json.dumps(metric.dimension)}, "Value": {value!r}, "NodeId": "{node_id}", '
            f'"Timestamp": {metric.timestamp:.6f}}}\n')


def hour_dir(epoch: int) -> str:
    return time.strftime("%Y%m%d%H", time.gmtime(epoch))


def final_path(out_dir: Path, epoch: int, node_id: str) -> Path:
    """``system/incremental/<YYYYMMDDHH>/<epoch>.<node>.json``; a later free second if that one is taken."""
    while True:
        path = out_dir / SYSTEM_DIR / INCREMENTAL_DIR / hour_dir(epoch) / f"{epoch:010d}.{node_id}.json"
        if not path.exists():
            return path
        epoch += 1


def _publish(partial: Path, out_dir: Path, epoch: int, node_id: str) -> Path | None:
    """Rename a hidden period file into place (or remove it when it holds no complete line)."""
    with open(partial, "rb+") as f:
        data = f.read()
        cut = data.rfind(b"\n") + 1  # a line cut short by a kill is not data
        if cut < len(data):
            f.truncate(cut)
    if cut == 0:
        partial.unlink()
        return None
    target = final_path(out_dir, epoch, node_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(partial, target)
    return target


class SystemMetricsWriter:
    """Writes one host's metrics under ``out_dir`` (a ``profiler-output/`` directory).

    Args:
        out_dir: the profiler output root (``system/`` is created below it).
        node_id: the host, ``algo-N``.
        period: seconds per file (files start at multiples of it, UTC).

    Raises:
        ValueError: a host name smdebug's readers would not accept.
    """

    def __init__(self, out_dir: str | os.PathLike[str], node_id: str = "algo-1", *,
                 period: float = PERIOD_SECONDS_DEFAULT) -> None:
        self.out_dir = Path(out_dir)
        self.node_id = check_node_id(node_id)
        if not period > 0:
            raise ValueError(f"period must be positive, got {period!r}")
        self.period = period
        self._fd: int | None = None
        self._epoch = 0
        self._partial: Path | None = None
        #: the files published so far
        self.published: list[Path] = []

    def _period_start(self, timestamp: float) -> int:
        return int(timestamp // self.period * self.period)

    def write(self, metrics: Iterable[SystemMetric]) -> None:
        """Append one sample's records (to the file of the first record's period)."""
        items = list(metrics)
        if not items:
            return
        epoch = self._period_start(items[0].timestamp)
        if self._fd is not None and epoch != self._epoch:
            self.rotate()
        if self._fd is None:
            self._open(epoch)
        assert self._fd is not None
        data = "".join(encode(m, self.node_id) for m in items).encode()
        view = memoryview(data)
        while view:  # one write() in practice; a short write is finished, never left torn
            view = view[os.write(self._fd, view):]

    def _open(self, epoch: int) -> None:
        system = self.out_dir / SYSTEM_DIR
        system.mkdir(parents=True, exist_ok=True)
        self._epoch = epoch
        self._partial = system / f".{epoch:010d}.{self.node_id}.tmp"
        self._fd = os.open(self._partial, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def rotate(self) -> None:
        """Publish the current file (if any); the next write starts a new one."""
        if self._fd is None or self._partial is None:
            return
        os.close(self._fd)
        self._fd = None
        published = _publish(self._partial, self.out_dir, self._epoch, self.node_id)
        if published is not None:
            self.published.append(published)
        self._partial = None

    def close(self) -> None:
        """Publish what was written. Safe to call twice."""
        self.rotate()


def recover(out_dir: str | os.PathLike[str], node_id: str | None = None) -> list[Path]:
    """Publish the hidden period files a killed monitor left (its complete lines); returns them.

    Call only when no monitor writes for that host any more.
    """
    system = Path(out_dir) / SYSTEM_DIR
    found: list[Path] = []
    if not system.is_dir():
        return found
    for partial in sorted(system.iterdir()):
        match = _PARTIAL.fullmatch(partial.name)
        if match is None or (node_id is not None and match[2] != node_id):
            continue
        published = _publish(partial, Path(out_dir), int(match[1]), match[2])
        if published is not None:
            logger.info("recovered %s from an interrupted monitor", published)
            found.append(published)
    return found


def write_end_marker(out_dir: str | os.PathLike[str], *subdirs: str) -> None:
    """``training_job_end.ts`` in each of ``subdirs`` (default ``system`` and ``framework``) of ``out_dir``."""
    for sub in subdirs or (SYSTEM_DIR, "framework"):
        directory = Path(out_dir) / sub
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{END_MARKER}.tmp"
        tmp.write_bytes(b"")
        os.replace(tmp, directory / END_MARKER)


__all__ = ["END_MARKER", "PERIOD_SECONDS_DEFAULT", "SystemMetricsWriter", "check_node_id", "encode", "final_path",
           "recover", "write_end_marker"]
