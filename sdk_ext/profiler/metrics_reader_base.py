"""What the system-metrics and framework-events readers share: where the files are, which exist, and
which timestamps they cover (smdebug's ``smdebug.profiler.metrics_reader_base``).

A reader lists its prefix (``system/`` or ``framework/``) under a profiler-output root, keeps a map of
file timestamp -> file names (local paths, or ``s3://`` URIs), and reads only the files a query's
window needs. All I/O goes through :mod:`sdk_ext.storage`: a failed listing or read raises
:class:`~sdk_ext.exceptions.StorageError`, it never looks like "no data yet". ``files_read`` counts
the files fetched, so what a query cost can be checked.
"""

from __future__ import annotations

import bisect
import builtins
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from sdk_ext.profiler.profiler_constants import (
    CONVERT_TO_MICROSECS,
    ENV_TRAIILING_DURATION,
    PYTHONTIMELINE_SUFFIX,
    TRAILING_DURATION_DEFAULT,
)
from sdk_ext.profiler.utils import TimeUnits, convert_utc_timestamp_to_microseconds, is_s3_path
from sdk_ext.storage import LocalStorage, ReadRequest, Storage

log = logging.getLogger(__name__)


def env_microseconds(name: str, default: int) -> int:
    """An integer number of microseconds from the environment (smdebug's tuning variables).

    Raises:
        ValueError: the variable is set but is not an integer.
    """
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(
            f"environment variable {name}={raw!r} must be an integer number of microseconds"
        ) from None


class ProfilerSource:
    """A profiler-output root: a local directory or ``s3://bucket/prefix``. Constructing it does no I/O."""

    def __init__(self, path: str | os.PathLike[str], *, storage: Storage | None = None) -> None:
        self.path = os.fspath(path)
        self.is_s3 = is_s3_path(self.path)
        self._storage = storage

    @property
    def storage(self) -> Storage:
        if self._storage is None:
            if self.is_s3:
                from sdk_ext.storage.s3 import S3Storage  # boto3 only when S3 is read

                self._storage = S3Storage.from_uri(self.path)
            else:
                self._storage = LocalStorage(os.path.expanduser(self.path))
        return self._storage

    def name_of(self, key: str) -> str:
        """The file name smdebug would give for ``key``: a local path or an ``s3://`` URI."""
        if self.is_s3:
            return f"{self.path.rstrip('/')}/{key}"
        return os.path.join(os.path.expanduser(self.path), *key.split("/"))

    def list(self, prefix: str, *, start_after: str = "") -> builtins.list[str]:
        return list(self.storage.list(prefix, start_after=start_after))

    def read_many(self, keys: Sequence[str]) -> builtins.list[bytes]:
        return self.storage.read_many([ReadRequest(k) for k in keys])


class MetricsReaderBase:
    """The file map and window logic of the readers; subclasses say how names map to timestamps."""

    prefix: str = ""

    def __init__(self, use_in_memory_cache: bool = False) -> None:
        self.logger = log
        self._event_parsers: list[Any] = []
        self._timestamp_to_filename: dict[int, list[str]] = {}
        self._parsed_files: set[str] = set()
        self._key_of: dict[str, str] = {}  # file name -> key under the source root
        # S3 only: listings restart after this key (trailing the newest file), smdebug's attribute name
        self._startAfter_prefix = ""
        self._cache_events_in_memory = use_in_memory_cache
        self.files_read = 0  # files fetched so far (each fetch counts, cached files do not)
        self._source: ProfilerSource | None = None

    def _attach(self, path: str | os.PathLike[str], *, remote: bool, other: str, storage: Storage | None) -> None:
        """Read from ``path`` (``remote``: an ``s3://`` prefix, else a local directory) and list it now;
        the wrong kind of path is a ValueError naming ``other``, the reader class for it."""
        location = os.fspath(path)
        if location.startswith("s3://") != remote:
            raise ValueError(
                f"{location!r} is not an S3 path: write it as s3://bucket/prefix, or use {other}" if remote
                else f"{location!r} is an S3 path: use {other} for it"
            )
        self._source = ProfilerSource(location, storage=storage)
        self.refresh_event_file_list()

    # --- what exists ---------------------------------------------------------------------------

    def get_all_event_parsers(self) -> list[Any]:
        return self._event_parsers

    def get_timestamp_of_first_available_file(self) -> int:
        """The smallest file timestamp (us), 0 when there is no file."""
        return min(self._timestamp_to_filename) if self._timestamp_to_filename else 0

    def get_timestamp_of_latest_available_file(self) -> int:
        """The largest file timestamp (us), 0 when there is no file."""
        return max(self._timestamp_to_filename) if self._timestamp_to_filename else 0

    def _get_timestamp_from_filename(self, event_file: str) -> int | None:
        raise NotImplementedError

    def refresh_event_file_list(self) -> None:
        """List the source again (on S3 from a little before the newest file, for late uploads)."""
        source = self._source
        if source is None:
            return
        prefix = self.prefix.rstrip("/") + "/"
        self._add_files(source.list(prefix, start_after=self._startAfter_prefix if source.is_s3 else ""))
        if source.is_s3:
            self._update_start_after_prefix()

    def _add_files(self, keys: Sequence[str]) -> None:
        assert self._source is not None
        for key in keys:
            timestamp = self._get_timestamp_from_filename(key)
            name = self._source.name_of(key)
            if timestamp is None or name in self._key_of:
                continue
            self._key_of[name] = key
            bisect.insort(self._timestamp_to_filename.setdefault(timestamp, []), name)

    def _update_start_after_prefix(self) -> None:
        if not self._timestamp_to_filename:
            return
        trailing = env_microseconds(ENV_TRAIILING_DURATION, TRAILING_DURATION_DEFAULT)
        stamps = sorted(self._timestamp_to_filename)
        at = stamps[min(bisect.bisect_left(stamps, stamps[-1] - trailing), len(stamps) - 1)]
        self._startAfter_prefix = self._key_of[self._timestamp_to_filename[at][0]]

    # --- reading -------------------------------------------------------------------------------

    def _fetch(self, names: Sequence[str]) -> list[bytes]:
        """The bytes of these files (names as in the file map), fetched concurrently where the storage can."""
        if not names:
            return []
        assert self._source is not None
        keys = [self._key_of.get(n, n) for n in names]
        data = self._source.read_many(keys)
        self.files_read += len(names)
        return data

    def parse_event_files(self, event_files: Sequence[str]) -> None:
        raise NotImplementedError

    def _get_event_files_in_the_range(
        self, start_time_microseconds: int, end_time_microseconds: int
    ) -> list[str]:
        raise NotImplementedError

    def get_events(
        self,
        start_time: float,
        end_time: float,
        unit: TimeUnits = TimeUnits.MICROSECONDS,
        event_type: str | None = None,
        file_suffix_filter: Sequence[str] | None = None,
    ) -> list[Any]:
        """The events recorded in ``[start_time, end_time]`` (in ``unit``), reading only the files of that window.

        Without ``use_in_memory_cache`` nothing is kept between calls; with it, parsed files are kept
        and not read again.
        """
        start_us = int(convert_utc_timestamp_to_microseconds(start_time, unit))
        end_us = int(convert_utc_timestamp_to_microseconds(end_time, unit))
        files = self._get_event_files_in_the_range(start_us, end_us)
        if file_suffix_filter is not None:
            files = [f for f in files if any(f.endswith(s) for s in file_suffix_filter)]
        self.logger.debug("reading %d event files for [%d, %d] us", len(files), start_us, end_us)
        self.parse_event_files(files)
        result: list[Any] = []
        for parser in self.get_all_event_parsers():
            if event_type is not None:
                result.extend(
                    parser.get_events_within_time_range(start_us, end_us, TimeUnits.MICROSECONDS, event_type)
                )
            else:
                result.extend(parser.get_events_within_time_range(start_us, end_us, TimeUnits.MICROSECONDS))
            if not self._cache_events_in_memory:
                parser.clear_events()
                self._parsed_files = set()
        return result

    def _get_time_interval_for_step(self, start_step: int, end_step: int) -> tuple[int, int]:
        """``[start of start_step, start of end_step - 1us]`` from the step events of python timelines; (0, 0)
        if either step is not found."""
        events = self.get_events(
            0,
            time.time() * CONVERT_TO_MICROSECS,
            TimeUnits.MICROSECONDS,
            file_suffix_filter=[PYTHONTIMELINE_SUFFIX],
        )
        events.sort(key=lambda e: e.start_time)
        start_us: int | None = None
        end_us: int | None = None
        for event in events:
            args = getattr(event, "event_args", None)
            if not args or "step_num" not in args:
                continue
            step = int(args["step_num"])
            if start_us is None and step == start_step:
                start_us = event.start_time
            if end_us is None and step == end_step:
                end_us = event.start_time - 1
            if start_us is not None and end_us is not None:
                return start_us, end_us
        self.logger.info("invalid step interval [%s, %s]: no step events for both", start_step, end_step)
        return 0, 0

    def get_events_by_step(
        self,
        start_step: int,
        end_step: int,
        event_type: str | None = None,
        file_suffix_filter: Sequence[str] | None = None,
    ) -> list[Any]:
        """The events between the start of ``start_step`` and the start of ``end_step``."""
        start_us, end_us = self._get_time_interval_for_step(start_step, end_step)
        return self.get_events(start_us, end_us, TimeUnits.MICROSECONDS, event_type, file_suffix_filter)


__all__ = ["MetricsReaderBase", "ProfilerSource", "env_microseconds"]
