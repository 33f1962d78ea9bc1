"""What a trial knows about its steps: the index files read so far, and incremental refresh.

Every index file becomes one :class:`StepFile` (the tensors one worker saved at one global step).
Queries scan step files rather than per-tensor tables, so loading a step costs one pass over its
JSON and nothing per tensor beyond a dict entry. A refresh lists ``index/`` only after a token
(the key of the last step every worker has written) and reads only keys it has not read before,
all in one ``read_many`` batch, so an S3 listing stays one page and no index file is fetched twice.

Bookkeeping follows smdebug's reader (reference/FORMAT.md §8.2): the first index file seen for a
global step fixes its mode and mode step; a step is complete once ``num_workers`` workers wrote it,
and every step up to the last complete one counts as complete (stragglers are given up); when more
than ``incomplete_step_window`` steps wait for missing workers, the older half is given up too.
"""

from __future__ import annotations

import bisect
import json
import logging
from dataclasses import dataclass
from typing import Any

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.format.index import IndexFile, parse_index
from sdk_ext.format.paths import (
    INDEX_DIR,
    REDUCTION_PREFIX,
    index_key,
    parse_index_key,
    parse_reduction_name,
    serialize_worker,
)
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import ReadRequest, Storage

logger = logging.getLogger(__name__)

Location = tuple[int, int]  # (start, length) of a whole record in the step's event file
ReductionKey = tuple[str, bool]  # (op, abs)

_MODES = {m.name: m for m in ModeKeys}
#: read index files in batches of this many keys (one read_many each)
_READ_BATCH = 1000


@dataclass(slots=True, eq=False)
class StepFile:
    """One index file: what ``worker`` saved at global ``step``.

    ``raw`` maps tensor names to their record, ``reductions`` maps base tensor names to their
    stored reductions, ``shapes`` holds shape entries. A name may be in several of them: unlike
    smdebug, a shape entry never hides the raw value saved with it. ``names`` is every base name
    with any entry (shared between step files that hold the same names).
    """

    key: str
    step: int
    worker: str
    mode: ModeKeys
    mode_step: int
    event_key: str | None
    event_size: int  # bytes the event file holds according to this index (end of its last record)
    raw: dict[str, Location]
    reductions: dict[str, dict[ReductionKey, Location]]
    shapes: dict[str, tuple[int, ...]]
    names: frozenset[str]


class _Malformed(Exception):
    """The fast parse met something unexpected; the validating parser explains it."""


class StepFileParser:
    """Turns index documents into StepFiles, sharing parsed reduction names and name sets."""

    def __init__(self) -> None:
        self._reduction_names: dict[str, tuple[str, str, bool] | None] = {}
        self._name_sets: dict[frozenset[str], frozenset[str]] = {}

    def parse(self, data: bytes, *, key: str, step: int, worker: str) -> StepFile:
        """Parse one index file.

        Raises:
            IndexReaderException: the document is corrupt or invalid (names ``key``).
        """
        try:
            return self._fast(data, key, step, worker)
        except (_Malformed, ValueError, KeyError, TypeError, AttributeError):
            # The validating parser raises a precise error, or accepts what the fast one refused.
            return self._from_index(parse_index(data, key=key), key, step, worker)

    def _reduction(self, name: str) -> tuple[str, str, bool] | None:
        try:
            return self._reduction_names[name]
        except KeyError:
            parsed = self._reduction_names[name] = parse_reduction_name(name)
            return parsed

    def _fast(self, data: bytes, key: str, step: int, worker: str) -> StepFile:
        doc = json.loads(data)
        meta = doc["meta"]
        mode = _MODES.get(meta["mode"]) or _MODES[meta["mode"].strip()]
        mode_step = meta["mode_step"]
        if type(mode_step) is not int or mode_step < 0:
            raise _Malformed
        event_key = meta.get("event_file_name")
        raw: dict[str, Location] = {}
        reductions: dict[str, dict[ReductionKey, Location]] = {}
        end = 0
        payload = doc.get("tensor_payload") or ()
        if payload and type(event_key) is not str:
            raise _Malformed
        for entry in payload:
            name = entry["tensorname"]
            start = entry["start_idx"]
            length = entry["length"]
            if type(start) is not int or type(length) is not int or type(name) is not str or start < 0 or length < 0:
                raise _Malformed
            end = max(end, start + length)
            if REDUCTION_PREFIX in name:
                parsed = self._reduction(name)
                if parsed is not None:
                    base, op, is_abs = parsed
                    reductions.setdefault(base, {})[(op, is_abs)] = (start, length)
                    continue
            raw[name] = (start, length)  # a repeated name: the last entry wins, as in smdebug
        shapes: dict[str, tuple[int, ...]] = {}
        for entry in doc.get("shape_payload") or ():
            shape = entry["shape"]
            name = entry["tensorname"]
            if type(name) is not str or type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
                raise _Malformed
            shapes[name] = tuple(shape)
        if "tensor_payload" not in doc and "shape_payload" not in doc:
            raise _Malformed
        return self._step_file(key, step, worker, mode, mode_step, event_key, end, raw, reductions, shapes)

    def _from_index(self, index: IndexFile, key: str, step: int, worker: str) -> StepFile:
        raw: dict[str, Location] = {}
        reductions: dict[str, dict[ReductionKey, Location]] = {}
        end = 0
        for t in index.tensors:
            end = max(end, t.start + t.length)
            parsed = self._reduction(t.name) if REDUCTION_PREFIX in t.name else None
            if parsed is not None:
                reductions.setdefault(parsed[0], {})[(parsed[1], parsed[2])] = (t.start, t.length)
            else:
                raw[t.name] = (t.start, t.length)
        shapes = {s.name: s.shape for s in index.shapes}
        return self._step_file(
            key, step, worker, index.mode, index.mode_step, index.event_file, end, raw, reductions, shapes
        )

    def _step_file(
        self,
        key: str,
        step: int,
        worker: str,
        mode: ModeKeys,
        mode_step: int,
        event_key: str | None,
        end: int,
        raw: dict[str, Location],
        reductions: dict[str, dict[ReductionKey, Location]],
        shapes: dict[str, tuple[int, ...]],
    ) -> StepFile:
        names = frozenset(raw)
        if reductions or shapes:
            names = names.union(reductions, shapes)
        names = self._name_sets.setdefault(names, names)
        return StepFile(key, step, worker, mode, mode_step, event_key, end, raw, reductions, shapes, names)


class TrialIndex:
    """Step files by global step, the mode maps, and completeness across workers."""

    def __init__(
        self,
        storage: Storage,
        *,
        range_steps: tuple[int | None, int | None] | None = None,
        incomplete_step_window: int = 1000,
    ) -> None:
        self.storage = storage
        self.range_steps = range_steps
        self.incomplete_step_window = incomplete_step_window
        self.num_workers = 1
        self.known_workers: set[str] = set()
        self.by_step: dict[int, list[StepFile]] = {}  # each list sorted by worker
        self.steps: list[int] = []  # sorted global steps
        self.global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self.mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self.mode_names: dict[ModeKeys, set[str]] = {}
        self.names: set[str] = set()
        self.last_complete_step = -1
        self.generation = 0  # bumped whenever step files are added
        self._parser = StepFileParser()
        self._token = ""  # list index keys after this one
        self._seen: set[str] = set()  # keys after the token already handled
        self._merged: set[tuple[ModeKeys, int]] = set()  # (mode, id(name set)) already in mode_names

    def _in_range(self, step: int) -> bool:
        if self.range_steps is None:
            return True
        begin, end = self.range_steps
        return (begin is None or step >= begin) and (end is None or step < end)

    def refresh(self) -> int:
        """Read the index files that appeared since the last refresh. Returns how many were added."""
        wanted: list[tuple[str, int, str]] = []
        for key in self.storage.list(INDEX_DIR + "/", start_after=self._token):
            if key in self._seen:
                continue
            self._seen.add(key)
            parsed = parse_index_key(key)
            if parsed is None or not self._in_range(parsed[0]):
                continue
            wanted.append((key, parsed[0], parsed[1]))
        added = 0
        for at in range(0, len(wanted), _READ_BATCH):
            batch = wanted[at : at + _READ_BATCH]
            datas: list[bytes] = self.storage.read_many([ReadRequest(key) for key, _, _ in batch])
            for (key, step, worker), data in zip(batch, datas):
                step_file = self._parser.parse(data, key=key, step=step, worker=worker)
                if step_file.names:  # smdebug ignores an index file without entries
                    self._add(step_file)
                    added += 1
        if added:
            self.generation += 1
            logger.debug("read %d new index files from %s", added, self.storage.uri)
        self._advance()
        return added

    def _add(self, sf: StepFile) -> None:
        step = sf.step
        files = self.by_step.get(step)
        if files is None:
            self.by_step[step] = files = [sf]
            if not self.steps or step > self.steps[-1]:
                self.steps.append(step)
            else:
                bisect.insort(self.steps, step)
        else:
            files.append(sf)
            files.sort(key=_worker_of)
        self.known_workers.add(sf.worker)
        mode = sf.mode
        self.global_to_mode.setdefault(step, (mode, sf.mode_step))
        if mode is not ModeKeys.GLOBAL:
            self.mode_to_global.setdefault(mode, {}).setdefault(sf.mode_step, step)
            tag: tuple[ModeKeys, int] = (mode, id(sf.names))
            if tag not in self._merged:  # name sets are shared, so most files merge nothing
                self._merged.add(tag)
                self.mode_names.setdefault(mode, set()).update(sf.names)
        tag = (ModeKeys.GLOBAL, id(sf.names))
        if tag not in self._merged:
            self._merged.add(tag)
            self.names.update(sf.names)
        if len(files) >= self.num_workers and step > self.last_complete_step:
            self.last_complete_step = step

    def _advance(self) -> None:
        """Move the listing token past steps that can gain nothing more, and apply the wait window."""
        window = self.incomplete_step_window
        first = bisect.bisect_right(self.steps, self.last_complete_step)
        while window >= 2 and len(self.steps) - first > window:
            given_up = self.steps[first + window // 2 - 1]
            logger.info(
                "%d steps wait for missing workers (window %d): taking steps up to %d as complete",
                len(self.steps) - first, window, given_up,
            )
            self.last_complete_step = given_up
            first = bisect.bisect_right(self.steps, given_up)
        if self.last_complete_step < 0 or not self.known_workers:
            return
        last_worker = max(serialize_worker(w) for w in self.known_workers)
        token = index_key(self.last_complete_step, last_worker)
        if token > self._token:
            self._token = token
            self._seen = {k for k in self._seen if k > token}

    # --- queries --------------------------------------------------------------------------------

    def is_complete(self, step: int) -> bool:
        """Whether every worker wrote ``step``, or it lies at or before the last complete step."""
        files = self.by_step.get(step)
        return files is not None and (len(files) >= self.num_workers or step <= self.last_complete_step)

    def last_step_complete(self) -> bool:
        return not self.steps or len(self.by_step[self.steps[-1]]) >= self.num_workers

    def files_at(self, step: int, mode: ModeKeys) -> tuple[int, list[StepFile]] | None:
        """``(global step, step files)`` for a step of ``mode`` (a global step for GLOBAL), or None."""
        if mode is ModeKeys.GLOBAL:
            files = self.by_step.get(step)
            return None if files is None else (step, files)
        table = self.mode_to_global.get(mode)
        global_step = None if table is None else table.get(step)
        if global_step is None:
            return None
        files = [f for f in self.by_step[global_step] if f.mode is mode and f.mode_step == step]
        return global_step, files

    def mode_steps(self, mode: ModeKeys) -> list[int]:
        """All steps of ``mode`` (global steps for GLOBAL), sorted."""
        if mode is ModeKeys.GLOBAL:
            return list(self.steps)
        return sorted(self.mode_to_global.get(mode, ()))

    def global_of(self, step: int, mode: ModeKeys) -> int | None:
        if mode is ModeKeys.GLOBAL:
            return step
        table = self.mode_to_global.get(mode)
        return None if table is None else table.get(step)

    def describe(self) -> dict[str, Any]:
        """Counters for logs and benchmarks."""
        return {
            "steps": len(self.steps),
            "index_files": sum(len(f) for f in self.by_step.values()),
            "last_complete_step": self.last_complete_step,
            "token": self._token,
        }


def _worker_of(sf: StepFile) -> str:
    return sf.worker


__all__ = ["IndexReaderException", "Location", "ReductionKey", "StepFile", "StepFileParser", "TrialIndex"]
