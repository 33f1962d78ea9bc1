"""Optional TensorBoard export: scalars and histograms of saved tensors, per mode.

Layout: ``{tensorboard_dir}/{MODE}/{first step:012d}_{pid}_{hostname}.tfevents``, one file per mode
per process, appended as steps are saved and flushed at every step end. TensorBoard files use the
real payload CRC and start with a ``file_version`` record; TensorBoard reads a growing file and
stops at a half-written tail, so no temporary names are needed here. Trials never read these.

What is exported: members of scalar collections (losses, metrics) and every ``save_scalar`` value
as ``simple_value`` (the first element); a histogram (TensorFlow's default buckets
``±1e-12 * 1.1**k``, trimmed to the data) for members of collections with ``save_histogram``.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from sdk_ext.format import event_pb2 as _event_pb2
from sdk_ext.format.records import encode_record
from sdk_ext.hooks.policy import TensorPlan
from sdk_ext.modes import ModeKeys

logger = logging.getLogger(__name__)
event_pb2: Any = _event_pb2  # generated module, untyped

_TAG_CLEAN = re.compile(r"[^-/\w\.]")


def _default_limits() -> np.ndarray[Any, Any]:
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(float("inf"))  # catch-all top bucket
    neg = [-x for x in reversed(pos[:-1])]
    return np.array(neg + [0.0] + pos)


_LIMITS = _default_limits()


def clean_tag(name: str) -> str:
    """A tag TensorBoard accepts: invalid characters become ``_``, no leading ``/``."""
    return _TAG_CLEAN.sub("_", name).lstrip("/")


def histogram_proto(values: np.ndarray[Any, Any]) -> Any:
    """A ``HistogramProto`` of ``values`` with TensorFlow's default bucket limits."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    flat = flat[np.isfinite(flat)]
    histo = event_pb2.HistogramProto()
    if flat.size == 0:
        return histo
    index = np.searchsorted(_LIMITS, flat, side="left")
    counts = np.bincount(index, minlength=len(_LIMITS))
    nonzero = np.nonzero(counts)[0]
    lo, hi = int(nonzero[0]), int(nonzero[-1])
    histo.min = float(flat.min())
    histo.max = float(flat.max())
    histo.num = float(flat.size)
    histo.sum = float(flat.sum())
    histo.sum_squares = float(np.dot(flat, flat))
    histo.bucket_limit.extend(float(x) for x in _LIMITS[lo : hi + 1])
    histo.bucket.extend(float(c) for c in counts[lo : hi + 1])
    return histo


class TensorBoardWriter:
    """Appends summaries to one event file per mode under ``root`` (a local directory)."""

    def __init__(self, root: str, *, clock: Callable[[], float] = time.time) -> None:
        self.root = root
        self.clock = clock
        self._files: dict[ModeKeys, IO[bytes]] = {}

    def _file(self, mode: ModeKeys, step: int) -> IO[bytes]:
        f = self._files.get(mode)
        if f is None:
            directory = os.path.join(self.root, mode.name)
            os.makedirs(directory, exist_ok=True)
            name = f"{step:012d}_{os.getpid()}_{socket.gethostname()}.tfevents"
            f = open(os.path.join(directory, name), "ab")  # noqa: SIM115 - kept open across steps
            event = event_pb2.Event(wall_time=self.clock(), file_version="brain.Event:2")
            f.write(encode_record(event.SerializeToString(), checksum=True))
            self._files[mode] = f
        return f

    def _write(self, mode: ModeKeys, step: int, value: Any) -> None:
        event = event_pb2.Event(wall_time=self.clock(), step=step)
        event.summary.value.append(value)
        self._file(mode, step).write(encode_record(event.SerializeToString(), checksum=True))

    def add_scalar(self, tag: str, value: float, *, step: int, mode: ModeKeys) -> None:
        self._write(mode, step, event_pb2.Summary.Value(tag=clean_tag(tag), simple_value=float(value)))

    def add_histogram(self, tag: str, values: np.ndarray[Any, Any], *, step: int, mode: ModeKeys) -> None:
        self._write(mode, step, event_pb2.Summary.Value(tag=clean_tag(tag), histo=histogram_proto(values)))

    def add(self, name: str, array: np.ndarray[Any, Any], plan: TensorPlan, *, step: int, mode: ModeKeys) -> None:
        """Export what ``plan`` asks of a saved tensor."""
        if array.dtype.kind not in "biuf":
            return
        if plan.histogram:
            self.add_histogram(f"{plan.collections[0]}/{name}" if plan.collections else name, array, step=step, mode=mode)
        if plan.scalar and array.size >= 1:
            self.add_scalar(name, float(array.reshape(-1)[0]), step=step, mode=mode)

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


__all__ = ["TensorBoardWriter", "clean_tag", "histogram_proto"]
