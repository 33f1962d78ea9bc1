"""Time units and file-name helpers of profiler output, under the names of ``smdebug.profiler.utils``.

Conversions truncate toward zero as smdebug's did (``int(...)``), so a window computed here selects the
same samples as it did there.
"""

from __future__ import annotations

import logging
import os
import re
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

from sdk_ext.format.profiler_paths import (
    TENSORBOARD_TIMELINE_SUFFIX,
    parse_system_metrics_key,
    parse_trace_file_key,
)

log = logging.getLogger(__name__)


class TimeUnits(Enum):
    """The unit of a timestamp given to a reader query."""

    SECONDS = 1
    MILLISECONDS = 2
    MICROSECONDS = 3
    NANOSECONDS = 4


def _unit(unit: TimeUnits) -> TimeUnits:
    if not isinstance(unit, TimeUnits):
        raise TypeError(f"unit must be a TimeUnits member (e.g. TimeUnits.SECONDS), not {unit!r}")
    return unit


# The products are taken factor by factor (x * 1000 * 1000, not x * 1e6): each float product rounds,
# and a window must select exactly the samples it selected in smdebug.


def convert_utc_timestamp_to_nanoseconds(timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS) -> float:
    """Nanoseconds since the epoch (an int unless ``unit`` is already nanoseconds)."""
    unit = _unit(unit)
    if unit is TimeUnits.SECONDS:
        return int(timestamp * 1000 * 1000 * 1000)
    if unit is TimeUnits.MILLISECONDS:
        return int(timestamp * 1000 * 1000)
    if unit is TimeUnits.MICROSECONDS:
        return int(timestamp * 1000)
    return timestamp


def convert_utc_timestamp_to_microseconds(
    timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS
) -> float:
    """Microseconds since the epoch (an int, except from nanoseconds: a float, as smdebug)."""
    unit = _unit(unit)
    if unit is TimeUnits.SECONDS:
        return int(timestamp * 1000 * 1000)
    if unit is TimeUnits.MILLISECONDS:
        return int(timestamp * 1000)
    if unit is TimeUnits.MICROSECONDS:
        return int(timestamp)
    return timestamp / 1000


def convert_utc_timestamp_to_seconds(timestamp: float, unit: TimeUnits = TimeUnits.MICROSECONDS) -> float:
    """Seconds since the epoch (an int, except from nanoseconds: a float, as smdebug)."""
    unit = _unit(unit)
    if unit is TimeUnits.SECONDS:
        return int(timestamp)
    if unit is TimeUnits.MILLISECONDS:
        return int(timestamp / 1000)
    if unit is TimeUnits.MICROSECONDS:
        return int(timestamp / 1000 / 1000)
    return timestamp / 1000 / 1000 / 1000


def convert_utc_datetime_to_nanoseconds(timestamp_datetime: datetime) -> float:
    return convert_utc_timestamp_to_nanoseconds(timestamp_datetime.timestamp(), unit=TimeUnits.SECONDS)


def convert_utc_datetime_to_microseconds(timestamp_datetime: datetime) -> float:
    return convert_utc_timestamp_to_microseconds(timestamp_datetime.timestamp(), unit=TimeUnits.SECONDS)


def is_valid_tfprof_tracefilename(filename: str) -> bool:
    """A TensorFlow profiler trace: ``.../tensorflow/detailed_profiling/.../<host>.trace.json.gz``."""
    return filename.endswith(TENSORBOARD_TIMELINE_SUFFIX) and "tensorflow/detailed_profiling" in filename


def is_valid_tracefilename(filename: str) -> bool:
    """A trace file in ``pevents/``: ``<end us>_<node>_<suffix>.json``."""
    return parse_trace_file_key(filename) is not None


def get_node_id_from_tracefilename(filename: str) -> str:
    """The node field of a trace file name (``905-algo-1``); for a TF profiler trace, from its metadata file."""
    info = parse_trace_file_key(filename)
    if info is not None:
        return info.node_id
    node_id, _, _ = read_tf_profiler_metadata_file(filename)
    return node_id


def get_node_id_from_system_profiler_filename(filename: str) -> str | None:
    """``algo-N`` of a system-metrics file name, or None."""
    info = parse_system_metrics_key(filename)
    return info.node_id if info is not None else None


def get_timestamp_from_tracefilename(filename: str) -> int:
    """The end time (us) in a trace file name; for a TF profiler trace its metadata file's; 0 if neither."""
    info = parse_trace_file_key(filename)
    if info is not None:
        return info.end_time_us
    _, _, end = read_tf_profiler_metadata_file(filename)
    return int(end)


def get_utctimestamp_us_since_epoch_from_system_profiler_file(filename: str) -> int | None:
    """The timestamp (us) in a system-metrics file name, or None."""
    info = parse_system_metrics_key(filename)
    return info.timestamp_us if info is not None else None


def validate_system_profiler_file(filename: str) -> bool:
    return parse_system_metrics_key(filename) is not None


def str2bool(v: str | bool) -> bool:
    """``"true"/"1"/"yes"/"on"`` -> True, ``"false"/"0"/"no"/"off"`` -> False.

    Raises:
        ValueError: anything else.
    """
    if isinstance(v, bool):
        return v
    text = v.strip().lower()
    if text in ("y", "yes", "t", "true", "on", "1"):
        return True
    if text in ("n", "no", "f", "false", "off", "0"):
        return False
    raise ValueError(f"invalid truth value {v!r}: use true or false")


def us_since_epoch_to_human_readable_time(us_since_epoch: float) -> str:
    """``2020-06-03T05:04:59:457089`` (UTC; smdebug's format, a colon before the microseconds)."""
    dt = datetime.fromtimestamp(us_since_epoch / 1e6, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S:%f")


def ns_since_epoch_to_human_readable_time(ns_since_epoch: float) -> str:
    dt = datetime.fromtimestamp(ns_since_epoch / 1e9, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S:%f")


_METADATA = re.compile(r"^(.+)_(\d+)_(\d+)\.metadata$")


def read_tf_profiler_metadata_file(file_path: str) -> tuple[str, str, str]:
    """``(node id, start us, end us)`` from the ``<node>_<start>_<end>.metadata`` file that the
    TensorFlow profiler leaves four directories above its trace; ``("", "0", "0")`` if there is none.

    An ``s3://`` trace's folder is listed on S3 (a failed listing raises ``StorageError``).
    """
    if not is_valid_tfprof_tracefilename(file_path):
        return "", "0", "0"
    if file_path.startswith("s3://"):
        from sdk_ext.storage.s3 import S3Storage  # boto3 only when S3 is read

        folder = "/".join(file_path.split("/")[:-4])
        names = (key.rsplit("/", 1)[-1] for key in S3Storage.from_uri(folder).list(""))
    else:
        root = Path(*Path(file_path).parts[:-4]) if len(Path(file_path).parts) > 4 else Path(".")
        if not root.is_dir():
            return "", "0", "0"
        names = (candidate.name for candidate in sorted(root.rglob("*.metadata")))
    for name in names:
        match = _METADATA.match(name)
        if match:
            return match.group(1), match.group(2), match.group(3)
    return "", "0", "0"


def is_s3_path(path: str | os.PathLike[str]) -> bool:
    return isinstance(path, str) and path.startswith("s3://")


__all__ = [
    "TimeUnits",
    "convert_utc_datetime_to_microseconds",
    "convert_utc_datetime_to_nanoseconds",
    "convert_utc_timestamp_to_microseconds",
    "convert_utc_timestamp_to_nanoseconds",
    "convert_utc_timestamp_to_seconds",
    "get_node_id_from_system_profiler_filename",
    "get_node_id_from_tracefilename",
    "get_timestamp_from_tracefilename",
    "get_utctimestamp_us_since_epoch_from_system_profiler_file",
    "is_s3_path",
    "is_valid_tfprof_tracefilename",
    "is_valid_tracefilename",
    "ns_since_epoch_to_human_readable_time",
    "read_tf_profiler_metadata_file",
    "str2bool",
    "us_since_epoch_to_human_readable_time",
    "validate_system_profiler_file",
]
