"""Reading values out of event files: whole small files once, large records by range, in batches.

Round trips dominate on S3, so an event file no larger than ``whole_file_bytes`` is fetched whole
the first time any of its records is wanted and kept in an LRU cache (``file_cache_bytes``,
:mod:`sdk_ext.trials.read.file_cache`): a rule that reads every tensor of a step pays one request for the
step. Larger files are read record by record (a ranged read each), and a batch sends all its
requests in one ``Storage.read_many`` so a remote backend can run them concurrently. For the batch
decoder (``Tensor.values``, :mod:`sdk_ext.trials.read.many_steps`) many files are read into one array, and
large records of one length into the rows of one array.

An index can name an event file that is not there yet (smdebug's writers upload in any order) or
that is still being appended to. Neither is data: the reader waits up to ``event_file_timeout`` for
it, never caches a short file, and decodes a record as soon as all of its bytes are present. It is
damage (:class:`~sdk_ext.exceptions.MissingEventFileError`), not "not yet", when the file will not
come: its index carries sdk_ext's checksums (sdk_ext's writer commits an event file before its
index), training has ended, or the worker has written later event files since.

Checksums (:mod:`sdk_ext.format.checksums`). Where an index file carries them, nothing of its event
file is returned unchecked: a whole file enters the file cache only if its CRC-32C matches the
index's (one pass over bytes just read), and a record read on its own, from a file that failed
that check or by byte range, is checked against its own CRC-32C; a mismatch raises
CorruptRecordError naming the file, the offset and the tensor.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from sdk_ext.exceptions import CorruptRecordError, MissingEventFileError, SdkExtError, StorageNotFound
from sdk_ext.format.checksums import crc32c
from sdk_ext.format.paths import EVENTS_DIR, parse_event_key
from sdk_ext.format.record_values import RecordDecoder
from sdk_ext.storage import Capabilities, ReadRequest, Storage
from sdk_ext.trials.index.trial_index import StepFile, TrialIndex
from sdk_ext.trials.options import TrialOptions, poll
from sdk_ext.trials.read.byte_ranges import Slabs
from sdk_ext.trials.read.file_cache import Entry, FileCache

logger = logging.getLogger(__name__)

T = TypeVar("T", bytes, memoryview)

#: Records at least this large are read into memory the returned array keeps (``read_into``), when the
#: storage can: a second copy of a large value costs more than the read (page faults on fresh memory).
LARGE_RECORD = 64 << 10

#: alignment of values read into the rows of one array (ValueReader._read_rows)
_ALIGN = 64

#: zero bytes after the files of a chunk read for the batch decoder, so that its reads past the last
#: record (a record's first bytes are walked with a fixed reach) stay inside the chunk
CHUNK_PAD = 512

#: event files fetched in one batch once values are read step after step (see ValueReader.read_ahead)
READ_AHEAD = 64

#: small batches of files are read into a shared array of this size (one chunk of the file cache) rather
#: than one array each: memory of 4 MiB and more gets huge pages (numpy asks for them), so filling it
#: costs a page fault per 2 MiB instead of one per 4 KiB, and a page fault costs as much as a small
#: file's read
ARENA_BYTES = 8 << 20

#: (event file key, record start, record length, bytes the index says the file holds, tensor name)
Request = tuple[str, int, int, int, str]



class EventFileUnavailable(SdkExtError):
    """An event file named by an index never became (fully) readable."""

    def __init__(self, key: str, reason: str) -> None:
        self.key, self.reason = key, reason
        super().__init__(f"{key}: {reason}")


class ValueReader:
    """Decodes records of a trial's event files, with a cache of whole small files."""

    def __init__(
        self,
        storage: Storage,
        options: TrialOptions,
        *,
        capabilities: Capabilities,
        training_ended: Callable[[], bool],
        checked: Callable[[str], StepFile | None] = lambda key: None,
    ) -> None:
        #: the step file whose index gives checksums for an event file key, if one does
        self.checked = checked
        self._storage = storage
        self._options = options
        self._training_ended = training_ended
        self.cache = FileCache(options.file_cache_bytes)  # whole small event files
        self._decoder = RecordDecoder()
        self.decode = self._decoder.decode
        direct = capabilities.direct_reads
        self._read_into = direct.read_into if direct is not None else None
        self._size = direct.size if direct is not None else None  # checks a range before allocating for it
        self.slabs = Slabs(storage, capabilities.memory_maps, budget=options.file_cache_bytes,
                           slab_bytes=self.cache.chunk_limit, whole_ok=self.file_ok,
                           checked=lambda key: self.checked(key) is not None)
        self._last_miss: int | None = None  # step of the last value read the cache did not hold
        #: the array small batches of files are read into (ARENA_BYTES): (array, its chunk number, bytes used)
        self._arena: tuple[np.ndarray[Any, Any], int, int] | None = None
        self.requests = 0  # storage requests made, for benchmarks and tests
        self.batched = 0  # values decoded many at a time (sdk_ext.trials.read.many_steps), for benchmarks and tests

    @property
    def whole_file_bytes(self) -> int:
        """Event files up to this size are read whole (and can be batch-decoded)."""
        return self._options.whole_file_bytes

    @property
    def decoder(self) -> RecordDecoder:
        return self._decoder

    def ranged(self, trial_bytes: int) -> bool:
        """Whether reads of one tensor over many steps should fetch just the byte ranges that hold
        its records (:mod:`sdk_ext.trials.read.byte_ranges`) rather than whole event files: when the trial's
        event files (``trial_bytes``) are more than the file cache holds, whole files read for one
        tensor would be gone before the next one."""
        return trial_bytes > self.cache.budget

    def file_ok(self, key: str, data: bytes | memoryview) -> bool:
        """Whether the whole event file ``data`` of ``key`` may enter the file cache: its index gives no
        checksum, or the CRC-32C of its bytes matches (then none of its records needs a check of its own)."""
        sf = self.checked(key)
        if sf is None or sf.checks is None or sf.checks.file is None:
            return True
        size = sf.event_size
        if len(data) < size:
            return False
        if crc32c(data if len(data) == size else memoryview(data)[:size]) == sf.checks.file:
            return True
        logger.warning("%s: CRC-32C of the event file does not match its index %s; checking it record by record",
                       key, sf.key)
        return False

    def record_ok(self, key: str, buf: bytes | memoryview, at: int, start: int, length: int) -> bool:
        """Whether the record ``buf[at : at + length]`` (at ``start`` in ``key``) matches the CRC-32C its
        index gives it (True when it gives none)."""
        sf = self.checked(key)
        want = None if sf is None else sf.record_crc(start)
        return want is None or crc32c(memoryview(buf)[at : at + length]) == want

    def check_record(self, key: str, buf: bytes | memoryview, at: int, start: int, length: int, tensor: str) -> None:
        """Check the record ``buf[at : at + length]`` (at ``start`` in event file ``key``) against the
        CRC-32C its index gives it, if the index gives one.

        Raises:
            CorruptRecordError: it does not match (names the file, the offset and the tensor).
        """
        sf = self.checked(key)
        if sf is None:
            return
        want = sf.record_crc(start)
        if want is None:
            return
        got = crc32c(memoryview(buf)[at : at + length])
        if got != want:
            raise CorruptRecordError(
                key, start, f"CRC-32C {got:08x} of the record's {length} bytes does not match {want:08x}, the "
                f"checksum its index {sf.key} gives it: the event file is damaged", tensor=tensor,
            )

    def decode_cached(self, entry: Entry, key: str, start: int, length: int, tensor: str) -> np.ndarray[Any, Any]:
        """The value of a record of the cached file ``entry`` (of ``key``)."""
        chunk, offset, have, _ = entry
        if start + length <= have:
            return self._decoder.decode(chunk, offset + start, length, name=key, base=-offset, key=tensor)
        # past the end of the file (the index disagrees with itself): decode the file alone, which says so
        return self._decoder.decode(chunk[offset : offset + have], start, length, name=key, key=tensor)

    def read(self, key: str, start: int, length: int, size: int, tensor: str) -> np.ndarray[Any, Any]:
        """The value of the record ``[start, start+length)`` of event file ``key`` (``size`` from its index)."""
        entry = self.cache.get(key)
        if entry is not None:
            return self.decode_cached(entry, key, start, length, tensor)
        if size <= self._options.whole_file_bytes:
            data = self._whole(key, start + length, size, tensor)
            if key not in self.cache:  # failed its file checksum, or longer than its index says
                self.check_record(key, data, start, start, length, tensor)
            return self._decoder.decode(data, start, length, name=key, key=tensor)
        if length >= LARGE_RECORD and self._read_into is not None:
            buffer = self._range_into(key, start, length, tensor)
            self.check_record(key, buffer, 0, start, length, tensor)
            return self._decoder.decode(buffer, 0, length, name=key, base=start, key=tensor, view=True)
        record = self._range(key, start, length, tensor)
        self.check_record(key, record, 0, start, length, tensor)
        return self._decoder.decode(record, 0, length, name=key, base=start, key=tensor)

    def read_ahead(self, index: TrialIndex, sf: StepFile) -> None:
        """Before reading a value of ``sf`` not in the cache: on a second such miss in a row walking
        forward through the steps, fetch the next ``READ_AHEAD`` steps' small event files in one batch.

        A loop over ``tensor.steps()`` then costs one storage round trip per ``READ_AHEAD`` steps
        instead of one per step (S3); a lone ``value()`` fetches only its own file.
        """
        if sf.event_size > self._options.whole_file_bytes or sf.event_key in self.cache:
            return
        steps = index.steps
        at = bisect.bisect_left(steps, sf.step)
        if at > 0 and steps[at - 1] == self._last_miss:
            batch = steps[at : at + READ_AHEAD]
            self.prefetch([(f.event_key, f.event_size) for s in batch for f in index.by_step[s] if f.event_key])
            self._last_miss = batch[-1]  # so that the miss just past this batch continues the walk
        else:
            self._last_miss = sf.step

    def prefetch(self, files: Sequence[tuple[str, int]]) -> None:
        """Fetch these whole (small) event files into the cache in one batch; ``(key, size)`` pairs.

        Best effort: a file missing or still short is left to the read that needs it (which waits).
        """
        self.fetch_whole(files)

    def fetch_whole(self, files: Sequence[tuple[str, int]], *, into: bool = False) -> None:
        """Fetch the small files of ``files`` (``(key, size)``) not cached yet into the cache, in one batch.

        ``into=True`` (many files, for the batch decoder): the files go into one array per chunk,
        read straight into it when the storage can ``read_into`` (no ``bytes`` in between: a copy
        and fresh memory saved per file). Best effort: a file missing or still short is left to
        the read that needs it (which waits).
        """
        whole_max = self._options.whole_file_bytes
        wanted = list({k: n for k, n in files if n <= whole_max and k not in self.cache}.items())
        if not wanted:
            return
        self.requests += len(wanted)
        if into:
            limit = self.cache.chunk_limit
            group: list[tuple[str, int]] = []
            total = 0
            for key, size in wanted:
                if group and total + size > limit:
                    self._read_chunk(group)
                    group, total = [], 0
                group.append((key, size))
                total += size
            self._read_chunk(group)
            return
        try:
            results: list[bytes] = self._storage.read_many([ReadRequest(k) for k, _ in wanted])
        except StorageNotFound:
            return
        self.cache.add(
            [(key, data) for (key, size), data in zip(wanted, results) if len(data) >= size and self.file_ok(key, data)]
        )

    def _read_chunk(self, files: Sequence[tuple[str, int]]) -> None:
        """Read the first ``size`` bytes of each file (``(key, size)``) into the cache, back to back in one
        chunk: a new one, or the rest of the open arena (:data:`ARENA_BYTES`) for a small batch."""
        total = sum(size for _, size in files)
        need = total + CHUNK_PAD
        arena_bytes = min(ARENA_BYTES, self.cache.chunk_limit)
        number = None
        if 2 * need <= arena_bytes:
            arena = self._arena
            if arena is None or arena[2] + need > arena_bytes or self.cache.chunk(arena[1]) is None:
                array = np.empty(arena_bytes, np.uint8)  # 4 MiB and more: numpy asks for huge pages
                arena = (array, self.cache.reserve(array.data.toreadonly()), 0)
            array, number, offset = arena
            self._arena = (array, number, -(-(offset + need) // 64) * 64)  # the next batch starts aligned
        else:
            array = np.empty(need, np.uint8)  # large: numpy asks for huge pages
            offset = 0
        start = offset
        array[offset + total : offset + need] = 0
        view = array.data
        placed = []
        read_into = self._read_into
        if read_into is None:
            try:
                results: list[bytes] = self._storage.read_many([ReadRequest(k) for k, _ in files])
            except StorageNotFound:
                return
        checked = self.checked
        for at, (key, size) in enumerate(files):
            part = view[offset : offset + size]
            if read_into is not None:
                try:
                    got = read_into(key, part)
                except StorageNotFound:
                    got = 0
            else:
                got = min(len(results[at]), size)
                part[:got] = memoryview(results[at])[:got]
            if got == size:
                # file_ok, inlined for the common cases (no checksum; a checksum that matches)
                sf = checked(key)
                want = None if sf is None or sf.checks is None else sf.checks.file
                if sf is None or want is None or (sf.event_size == size and crc32c(part) == want) or \
                        self.file_ok(key, part):
                    placed.append((key, offset, size))
            offset += size
        if number is None:
            self.cache.add_chunk(view[start:].toreadonly(), placed)
        else:
            self.cache.place(number, placed)

    def read_many(self, requests: Sequence[Request]) -> list[np.ndarray[Any, Any]]:
        """Values of several records; storage requests for files not cached go out in one batch."""
        files: dict[str, int] = {}  # whole files to fetch -> their size
        ranges: dict[tuple[str, int], int] = {}
        cached = self.cache
        whole_max = self._options.whole_file_bytes
        into = self._read_into is not None
        for key, start, length, size, _ in requests:
            if key in cached or key in files:
                continue
            if size <= whole_max:
                files[key] = size
            elif not (into and length >= LARGE_RECORD):  # those are read one by one, into their arrays
                ranges[(key, start)] = length
        fetched: dict[str, bytes] = {}
        records: dict[tuple[str, int], bytes] = {}
        batch = [ReadRequest(k) for k in files] + [ReadRequest(k, s, n) for (k, s), n in ranges.items()]
        if batch:
            self.requests += len(batch)
            try:
                results = self._storage.read_many(batch)
            except StorageNotFound:
                results = None  # some file is missing: fall back to one read (and wait) per request
            if results is not None:
                for req, data in zip(batch, results):
                    if req.length is None:
                        if len(data) >= files[req.key] and self.file_ok(req.key, data):
                            fetched[req.key] = data
                    elif len(data) == req.length:
                        records[(req.key, req.start)] = data
                self.cache.add(list(fetched.items()))
        decode = self._decoder.decode
        rows: dict[int, np.ndarray[Any, Any]] = {}
        if into:  # large records to be read one by one: same length ones go into rows of one array
            by_length: dict[int, list[int]] = {}
            for at, (key, start, length, size, _) in enumerate(requests):
                if (
                    length >= LARGE_RECORD
                    and size > whole_max
                    and key not in fetched
                    and key not in cached
                    and self._holds(key, start + length)  # else read() below waits for it, or says why not
                ):
                    by_length.setdefault(length, []).append(at)
            for group in by_length.values():
                if len(group) > 1:
                    rows.update(self._read_rows([requests[at] for at in group], group))
        out = []
        for at, (key, start, length, size, tensor) in enumerate(requests):
            row = rows.get(at)
            if row is not None:
                out.append(row)
                continue
            whole = fetched.get(key)
            if whole is not None:
                out.append(decode(whole, start, length, name=key, key=tensor))
                continue
            entry = cached.get(key)
            if entry is not None:
                out.append(self.decode_cached(entry, key, start, length, tensor))
                continue
            record = records.get((key, start))
            if record is not None:
                self.check_record(key, record, 0, start, length, tensor)
                out.append(decode(record, 0, length, name=key, base=start, key=tensor))
            else:
                out.append(self.read(key, start, length, size, tensor))
        return out

    def _read_rows(self, requests: Sequence[Request], at: Sequence[int]) -> dict[int, np.ndarray[Any, Any]]:
        """Read records of one length straight into the rows of one new array and decode them there.

        One allocation instead of one per record: fresh memory costs page faults, and numpy asks
        for huge pages for a large array. Each row starts where the first record's content lands
        on a 64-byte boundary, so the values (views of their rows) are aligned. Returns
        ``{at[k]: value}`` for the records read whole; the others are left to :meth:`read`.
        """
        read_into = self._read_into
        assert read_into is not None
        length = requests[0][2]
        stride = -(-(length + _ALIGN) // _ALIGN) * _ALIGN
        block = np.empty(len(requests) * stride, np.uint8)
        view = block.data
        pad = 0
        values: dict[int, np.ndarray[Any, Any]] = {}
        for k, (key, start, _, _, tensor) in enumerate(requests):
            row = view[k * stride + pad : k * stride + pad + length]
            self.requests += 1
            try:
                got = read_into(key, row, start=start)
            except StorageNotFound:
                got = 0
            if got != length:
                continue
            self.check_record(key, row, 0, start, length, tensor)
            value = self._decoder.decode(row, 0, length, name=key, base=start, key=tensor, view=True)
            if not values and value.nbytes:  # the first: move it so that its content is aligned
                inside = 0 <= value.ctypes.data - block.ctypes.data - k * stride < stride  # a view of its row
                if inside and value.ctypes.data % _ALIGN:
                    pad = (-value.ctypes.data) % _ALIGN
                    block[k * stride + pad : k * stride + pad + length] = block[k * stride : k * stride + length].copy()
                    row = view[k * stride + pad : k * stride + pad + length]
                    value = self._decoder.decode(row, 0, length, name=key, base=start, key=tensor, view=True)
            values[at[k]] = value
        return values

    def _whole(self, key: str, need: int, size: int, tensor: str | None = None) -> bytes:
        """The file, or at least its first ``need`` bytes once they exist; cached when complete."""

        def attempt() -> bytes | None:
            self.requests += 1
            try:
                data = self._storage.read(key)
            except StorageNotFound:
                return None
            return data if len(data) >= need else None

        data = self._wait(key, attempt, need, tensor)
        if len(data) >= size and self.file_ok(key, data):
            self.cache.add([(key, data)])
        return data

    def _range(self, key: str, start: int, length: int, tensor: str | None = None) -> bytes:
        def attempt() -> bytes | None:
            self.requests += 1
            try:
                data = self._storage.read(key, start=start, length=length)
            except StorageNotFound:
                return None
            return data if len(data) == length else None

        return self._wait(key, attempt, start + length, tensor)

    def _holds(self, key: str, end: int) -> bool:
        """Whether ``key`` holds at least ``end`` bytes (True if the storage cannot say, or need not: an index
        whose checksum matched states the writer's lengths, so a range it gives allocates nothing a
        damaged index made up, and a file shorter than it says is read short, which says so); False if missing."""
        if self._size is None or self.checked(key) is not None:
            return True
        try:
            return bool(self._size(key) >= end)
        except StorageNotFound:
            return False

    def _range_into(self, key: str, start: int, length: int, tensor: str | None = None) -> memoryview:
        read_into = self._read_into
        assert read_into is not None
        buffers: list[memoryview] = []

        def attempt() -> memoryview | None:
            self.requests += 1
            # the index's word is checked against the file first: a damaged length allocates nothing
            if not self._holds(key, start + length):
                return None
            if not buffers:
                buffers.append(np.empty(length, np.uint8).data)  # not zero-filled: read_into overwrites it
            buffer = buffers[0]
            try:
                got = read_into(key, buffer, start=start)
            except StorageNotFound:
                return None
            return buffer if got == length else None

        return self._wait(key, attempt, start + length, tensor)

    def _wait(self, key: str, attempt: Callable[[], T | None], need: int, tensor: str | None) -> T:
        """What ``attempt`` returns once the file ``key`` holds the ``need`` bytes asked for; damage when
        it will not come (see the module doc); EventFileUnavailable when waiting ran out."""
        data = attempt()
        if data is not None:
            return data
        sf = self.checked(key)
        if sf is not None:  # written by sdk_ext, which commits the event file before its index
            raise MissingEventFileError(key, f"{self._found(key, need)}, but its index {sf.key} was written after "
                                        "it was complete", tensor=tensor, step=sf.step)
        if self._training_ended():
            data = attempt()  # the marker may have come with the file
            if data is not None:
                return data
            raise MissingEventFileError(key, f"{self._found(key, need)}, and training has ended", tensor=tensor)
        if self._superseded(key):
            raise MissingEventFileError(key, "missing, and its worker has written event files of later steps since",
                                        tensor=tensor)
        logger.info("waiting up to %.1f s for event file %s", self._options.event_file_timeout, key)
        data = poll(
            attempt,
            timeout=self._options.event_file_timeout,
            interval=self._options.poll_interval,
            clock=self._options.clock,
            what=f"event file {key}",
        )
        if data is None:
            raise EventFileUnavailable(
                key, f"named by an index file but still missing or short after {self._options.event_file_timeout} s"
            )
        return data

    def _found(self, key: str, need: int) -> str:
        """What is wrong with ``key``, which should hold at least ``need`` bytes: missing, or how short."""
        try:
            size = int(self._size(key)) if self._size is not None else len(self._storage.read(key))
        except StorageNotFound:
            return "it is missing (deleted?)"
        if size == 0:
            return f"it is empty, and its index places records up to byte {need}"
        return f"it holds {size} bytes, and its index places records up to byte {need} (cut short, or the index is damaged)"

    def _superseded(self, key: str) -> bool:
        """Whether ``key`` is missing although its worker wrote a later step (it will not come; as smdebug)."""
        parsed = parse_event_key(key)
        if parsed is None or self._storage.exists(key):
            return False
        step, worker = parsed
        for later in self._storage.list(EVENTS_DIR + "/", start_after=key):
            found = parse_event_key(later)
            if found is not None and found[1] == worker and found[0] > step:
                return True
        return False

    def clear(self) -> None:
        self.cache.clear()
        self.slabs.clear()


__all__ = ["EventFileUnavailable", "Request", "ValueReader"]
