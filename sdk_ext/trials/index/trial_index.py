"""What a trial knows about its steps: the index files read so far, and incremental refresh.

Every index file becomes one :class:`StepFile` (the tensors one worker saved at one global step).
Queries scan step files rather than per-tensor tables, so loading a step costs one pass over its
JSON and nothing per tensor beyond a dict entry. A refresh lists ``index/`` only after a token
(the key of the last step every worker has written) and reads only keys it has not read before,
all in one ``read_many`` batch, so an S3 listing stays one page and no index file is fetched twice.

Bookkeeping follows smdebug's reader (docs/FORMAT.md#steps-mode-steps-and-complete-steps): the first index file seen for a
global step fixes its mode and mode step; a step is complete once ``num_workers`` workers wrote it,
and every step up to the last complete one counts as complete (stragglers are given up); when more
than ``incomplete_step_window`` steps wait for missing workers, the older half is given up too.

Fewer requests on S3 (docs/FORMAT.md#consolidated-index; smdebug #99):

* many index files to read and listings with sizes: they come from the writers' consolidated
  indexes where those hold them (:mod:`sdk_ext.trials.index.consolidated`), one GET per worker;
* a *finished* trial (the end marker was there before the listing) on storage that is not local,
  with more than ``lazy_index_files`` index files still to read, keeps them *pending*: the global
  steps are known from the file names, and a file is read when a query needs it. :meth:`ensure`
  reads one step's files for the first ``RANDOM_READS`` steps asked for (the value at the last step
  costs one index file, not all of them), then every pending file in one batch; :meth:`load` reads
  them all, which every query that needs the whole index (names, modes, a tensor's steps) does first.
  Until then a listed index file counts as a step; one that proves empty or unreadable when read
  leaves the steps (as it would have at open).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from typing import Any

from sdk_ext.exceptions import ConfigError, IndexReaderException
from sdk_ext.format.paths import INDEX_DIR, index_key, parse_index_key, serialize_worker
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import Capabilities, ReadRequest, Storage
from sdk_ext.trials.index.consolidated import Listed, list_with_sizes, read_consolidated
from sdk_ext.trials.index.step_files import Location, ReductionKey, StepFile, StepFileParser

logger = logging.getLogger(__name__)

RangeSteps = tuple[int | None, int | None]
#: read index files in batches of this many keys (one read_many each)
_READ_BATCH = 1000
#: steps :meth:`TrialIndex.ensure` reads one at a time before it reads every pending index file
RANDOM_READS = 2


def check_range_steps(range_steps: Sequence[int | None] | None) -> RangeSteps | None:
    """``range_steps`` as ``(begin, end)``, validated (ints >= 0 or None, end > begin).

    Raises:
        ConfigError: every problem found (smdebug used assert statements).
    """
    if range_steps is None:
        return None
    problems = []
    if len(range_steps) != 2:
        raise ConfigError(f"range_steps must be (begin, end), got {range_steps!r}", where="range_steps")
    begin, end = range_steps
    for label, bound in (("begin", begin), ("end", end)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
            problems.append(f"{label} must be None or an int >= 0, got {bound!r}")
    if not problems and begin is not None and end is not None and end <= begin:
        problems.append(f"end ({end}) must be greater than begin ({begin}); the range is [begin, end)")
    if problems:
        raise ConfigError(problems, where="range_steps")
    return begin, end


class TrialIndex:
    """Step files by global step, the mode maps, and completeness across workers."""

    def __init__(
        self,
        storage: Storage,
        *,
        capabilities: Capabilities,
        range_steps: RangeSteps | None = None,
        incomplete_step_window: int = 1000,
        lazy_index_files: int = 0,
    ) -> None:
        self.storage = storage
        self._listings = capabilities.listings
        self.range_steps = range_steps
        self.incomplete_step_window = incomplete_step_window
        #: a finished trial with more index files than this to read reads them on demand (0: never)
        self.lazy_index_files = lazy_index_files if capabilities.direct_reads is None else 0
        #: global step -> [(index key, worker)] listed but not read yet (finished trials only)
        self.pending: dict[int, list[tuple[str, str]]] = {}
        self._pending_last = -1
        self._random = 0  # steps read one at a time by ensure()
        self.num_workers = 1
        self.known_workers: set[str] = set()
        self.by_step: dict[int, list[StepFile]] = {}  # each list sorted by worker
        self._by_worker: dict[int, dict[str, StepFile]] = {}  # global step -> {worker: its file}, built on demand
        self.steps: list[int] = []  # sorted global steps
        self.global_to_mode: dict[int, tuple[ModeKeys, int]] = {}
        self.mode_to_global: dict[ModeKeys, dict[int, int]] = {}
        self.mode_names: dict[ModeKeys, set[str]] = {}
        self.names: set[str] = set()
        self.last_complete_step = -1
        self.event_bytes = 0  # what the event files of every step file read hold, according to their index files
        #: event file key -> the step file whose index gives its checksums (sdk_ext's writer)
        self.checked: dict[str, StepFile] = {}
        #: global step -> {index file key: why it cannot be read}; those steps' other files stay readable
        self.damaged: dict[int, dict[str, IndexReaderException]] = {}
        self.generation = 0  # bumped whenever step files are added
        self.on_new_files: Callable[[], None] | None = None  # called after the generation is bumped
        # Step files share their name sets, so "the steps of tensor X" is a union over a few sets:
        # id(name set) -> (name set, global steps), and (mode, id) -> (name set, [(mode step, global step)])
        self.steps_by_names: dict[int, tuple[frozenset[str], list[int]]] = {}
        self.mode_steps_by_names: dict[tuple[ModeKeys, int], tuple[frozenset[str], list[tuple[int, int]]]] = {}
        self._parser = StepFileParser()
        self._token = ""  # list index keys after this one
        self._seen: set[str] = set()  # keys after the token already handled
        self._merged: set[tuple[ModeKeys, int]] = set()  # (mode, id(name set)) already in mode_names
        self._unordered: set[Any] = set()  # keys of the step lists above that are not strictly increasing

    def _in_range(self, step: int) -> bool:
        if self.range_steps is None:
            return True
        begin, end = self.range_steps
        return (begin is None or step >= begin) and (end is None or step < end)

    def refresh(self, *, finished: bool = False) -> int:
        """Read the index files that appeared since the last refresh. Returns how many were added.

        ``finished``: the end-of-training marker was there before this listing (no more files will
        come), so a large remainder may be left pending (see the module doc).

        A corrupt index file does not stop the others: it goes into ``damaged`` (its step then
        raises IndexReaderException naming it when read) and one warning per refresh names them.
        Objects appear whole, so a file that does not parse never will: it is not read again.
        """
        wanted: list[Listed] = []
        for key, size in list_with_sizes(self.storage, self._listings, INDEX_DIR + "/", start_after=self._token):
            if key in self._seen:
                continue
            parsed = parse_index_key(key)
            if parsed is None or not self._in_range(parsed[0]):
                self._seen.add(key)
                continue
            wanted.append((key, parsed[0], parsed[1], size))
        docs = read_consolidated(self.storage, self._listings, wanted)
        later: list[Listed] = []
        if finished and self.lazy_index_files and len(wanted) - len(docs) > self.lazy_index_files:
            later = [w for w in wanted if w[0] not in docs]
            wanted = [w for w in wanted if w[0] in docs]
        try:
            added = self._read(wanted, docs)
        finally:
            for key, step, worker, _ in later:
                self._seen.add(key)
                self.known_workers.add(worker)
                self.pending.setdefault(step, []).append((key, worker))
                self._pending_last = max(self._pending_last, step)
            self._advance()
        return added

    def _read(self, wanted: Sequence[Listed], docs: dict[str, tuple[bytes, bytes]]) -> int:
        """Read and add the index files ``wanted`` (from ``docs`` where it holds them); how many were added."""
        added = 0
        bad: list[str] = []
        parser = self._parser
        try:
            from_docs = [w for w in wanted if w[0] in docs]
            for key, step, worker, _ in from_docs:
                head, tail = docs[key]
                self._seen.add(key)
                added += self._take(bad, parser.parse_parts, head, tail, key=key, step=step, worker=worker)
            rest = [w for w in wanted if w[0] not in docs]
            for at in range(0, len(rest), _READ_BATCH):
                batch = rest[at : at + _READ_BATCH]
                datas: list[bytes] = self.storage.read_many([ReadRequest(key) for key, _, _, _ in batch])
                for (key, step, worker, _), data in zip(batch, datas):
                    self._seen.add(key)
                    added += self._take(bad, parser.parse, data, key=key, step=step, worker=worker)
        finally:
            if bad:
                logger.warning(
                    "%s: %d index file(s) cannot be read, so their steps are unreadable (the other steps are "
                    "not affected): %s%s", self.storage.uri, len(bad), ", ".join(bad[:5]),
                    " ..." if len(bad) > 5 else "",
                )
            if added:
                self.generation += 1
                if self.on_new_files is not None:
                    self.on_new_files()
                logger.debug("read %d new index files from %s", added, self.storage.uri)
        return added

    def _take(self, bad: list[str], parse: Callable[..., StepFile], *data: bytes, key: str, step: int,
              worker: str) -> int:
        """Parse one index file (``parse(*data, key=, step=, worker=)``) and add it; 1 if it was added."""
        try:
            step_file = parse(*data, key=key, step=step, worker=worker)
        except IndexReaderException as err:
            self.damaged.setdefault(step, {})[key] = err
            bad.append(key)
            return 0
        if not step_file.names:  # smdebug ignores an index file without entries
            return 0
        self._add(step_file)
        return 1

    # --- index files read on demand (finished trials) -----------------------------------------------

    def load(self, steps: Sequence[int] | None = None) -> None:
        """Read the pending index files of ``steps`` (None: every pending one), in one batch."""
        if not self.pending:
            return
        chosen = list(self.pending) if steps is None else [s for s in steps if s in self.pending]
        items: list[Listed] = []
        for step in chosen:
            items += [(key, step, worker, None) for key, worker in self.pending.pop(step)]
        if not self.pending:
            self._pending_last = -1
        elif self._pending_last in chosen:
            self._pending_last = max(self.pending)
        items.sort()
        self._read(items, {})

    def ensure(self, step: int) -> None:
        """Make sure the index files of global ``step`` are read (see the module doc)."""
        if step in self.pending:
            self._random += 1
            self.load([step] if self._random <= RANDOM_READS else None)

    @property
    def last_step(self) -> int:
        """The highest global step listed (read or pending); -1 before any."""
        return max(self.steps[-1] if self.steps else -1, self._pending_last)

    def workers_at(self, step: int) -> int:
        """How many index files of global ``step`` were listed (read or pending)."""
        return len(self.by_step.get(step, ())) + len(self.pending.get(step, ()))

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
            if files[-1].worker <= sf.worker:  # listings come sorted: workers arrive in order
                files.append(sf)
            else:
                bisect.insort(files, sf, key=_worker_of)  # one insertion: a 64-worker step is not re-sorted 64 times
        self.known_workers.add(sf.worker)
        self.event_bytes += sf.event_size
        if sf.checks is not None and sf.event_key is not None:
            self.checked[sf.event_key] = sf
        mode = sf.mode
        names = sf.names
        group = self.steps_by_names.get(id(names))
        if group is None:
            self.steps_by_names[id(names)] = (names, [step])
        elif group[1][-1] != step:
            if step < group[1][-1]:
                self._unordered.add(id(names))
            group[1].append(step)
        if mode is not ModeKeys.GLOBAL:
            mode_group = self.mode_steps_by_names.get((mode, id(names)))
            pair = (sf.mode_step, step)
            if mode_group is None:
                self.mode_steps_by_names[(mode, id(names))] = (names, [pair])
            elif mode_group[1][-1] != pair:
                if pair < mode_group[1][-1]:
                    self._unordered.add((mode, id(names)))
                mode_group[1].append(pair)
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

    def damage_at(self, step: int, mode: ModeKeys) -> IndexReaderException | None:
        """Why an index file of ``step`` (of ``mode``; a global step for GLOBAL) could not be read, if one could not.

        For a mode step, only damaged files of global steps not known to belong to another mode step
        count (a damaged file's own mode is unknown).
        """
        if not self.damaged:
            return None
        if mode is ModeKeys.GLOBAL:
            found = self.damaged.get(step)
        else:
            known = self.global_of(step, mode)
            found = self.damaged.get(known) if known is not None else None
        if not found:
            return None
        key = min(found)
        err = found[key]
        return IndexReaderException(f"step {step} ({mode.name}) cannot be read: {err}")

    def is_complete(self, step: int) -> bool:
        """Whether every worker wrote ``step``, or it lies at or before the last complete step."""
        files = self.by_step.get(step)
        if files is None:
            return step in self.pending  # pending files belong to a finished trial
        return len(files) >= self.num_workers or step <= self.last_complete_step

    def file_of(self, step: int, worker: str) -> StepFile | None:
        """``worker``'s step file of global ``step`` (read already), in O(1): a reader asking every worker at
        a step must not scan the step's W files W times."""
        files = self.by_step.get(step)
        if files is None:
            return None
        table = self._by_worker.get(step)
        if table is None or len(table) != len(files):  # files were added to this step since
            self._by_worker[step] = table = {f.worker: f for f in files}
        return table.get(worker)

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
            return sorted(set(self.steps).union(self.pending)) if self.pending else list(self.steps)
        return sorted(self.mode_to_global.get(mode, ()))

    def global_of(self, step: int, mode: ModeKeys) -> int | None:
        if mode is ModeKeys.GLOBAL:
            return step
        table = self.mode_to_global.get(mode)
        return None if table is None else table.get(step)

    def tensor_steps(self, name: str, mode: ModeKeys) -> tuple[list[int], list[int]]:
        """``(steps, global steps)`` where ``name`` has any entry, sorted (mode steps unless GLOBAL).

        For GLOBAL both are the same list. The lists may be the index's own: do not modify them.
        """
        if mode is ModeKeys.GLOBAL:
            found = [(k, steps) for k, (names, steps) in self.steps_by_names.items() if name in names]
            if len(found) == 1 and found[0][0] not in self._unordered:  # the common case: sorted already
                return found[0][1], found[0][1]
            merged = sorted({g for _, steps in found for g in steps})
            return merged, merged
        groups = [(k, pairs) for k, (names, pairs) in self.mode_steps_by_names.items() if k[0] is mode and name in names]
        if len(groups) == 1 and groups[0][0] not in self._unordered:
            pairs = groups[0][1]
        else:
            pairs = sorted({pair for _, found_pairs in groups for pair in found_pairs})
        return [s for s, _ in pairs], [g for _, g in pairs]

    def describe(self) -> dict[str, Any]:
        """Counters for logs and benchmarks."""
        return {
            "steps": len(self.steps),
            "index_files": sum(len(f) for f in self.by_step.values()),
            "pending_index_files": sum(len(f) for f in self.pending.values()),
            "last_complete_step": self.last_complete_step,
            "token": self._token,
        }


def _worker_of(sf: StepFile) -> str:
    return sf.worker


__all__ = ["Location", "RangeSteps", "ReductionKey", "StepFile", "StepFileParser", "TrialIndex", "check_range_steps"]
