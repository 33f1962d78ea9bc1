"""Reading one tensor at many steps in one call (``Tensor.values``): many values per call, not per value.

Read one at a time, a value costs a few microseconds of Python: find its step file and record,
check the record, compare its layout, make an array. Here the steps are located once for all
tensors (:class:`~sdk_ext.trials.read.step_plan.StepPlan`), the event files are fetched in one batch into
the file cache, whose chunks hold many files back to back, and the records are checked and copied
with numpy a layout at a time (:mod:`sdk_ext.format.record_batch`):

1. the first record still pending is decoded alone, as ``Tensor.value`` would (which learns or
   confirms its tensor's layout, or raises for a damaged record); in the first round, not when the
   decoder knows the tensor's layout already (from its records read before);
2. every other pending record with that layout is matched and copied into one fresh array, whose
   rows become the values (writable; no two share memory);
3. records left (another shape, a real CRC footer, damage...) go round again; after
   ``_MAX_ROUNDS`` layouts the rest are decoded one at a time.

Only the one-at-a-time decoder ever raises, on the first pending record, so the result and the
error for a damaged record (the first in step order, naming file and offset) are those of reading
the steps one by one. Whatever this path does not cover (a file too large to be read whole, one
missing or still short, a step the plan cannot place) returns None: the caller reads step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from sdk_ext.format.record_batch import gather_contents, match_layout
from sdk_ext.trials.read.byte_ranges import MARGIN
from sdk_ext.trials.read.event_files import LARGE_RECORD
from sdk_ext.trials.read.file_cache import Chunk
from sdk_ext.trials.read.step_plan import Ints, StepPlan

if TYPE_CHECKING:
    from sdk_ext.trials.read.event_files import ValueReader

#: rounds (one per layout met) before the remaining records are decoded one at a time
_MAX_ROUNDS = 8

Array = np.ndarray[Any, Any]


def _rows(block: Array) -> list[Array]:
    """The rows of ``block`` as arrays (0-d arrays for scalars, never numpy scalars)."""
    if block.ndim == 1:
        return [block[k, ...] for k in range(block.shape[0])]
    return list(block)


def _resolve(reader: ValueReader, plan: StepPlan, numbers: Ints) -> bool:
    """Make sure the files ``numbers`` of ``plan`` are cached whole, and note where; False if they cannot be.

    Costs what ``numbers`` holds, not what the plan holds (a read-ahead window is a small part of its plan)."""
    cache = reader.cache
    if plan.epoch != cache.epoch:  # files left the cache since the plan noted where they were
        plan.chunk[:] = -1
        plan.epoch = cache.epoch
    unknown = numbers[plan.chunk[numbers] < 0]
    if not unknown.size:
        return True
    needed = list(dict.fromkeys(unknown.tolist()))  # (np.unique would import numpy.ma on first use: ~10 ms)
    files = [plan.files[i] for i in needed]
    before = cache.epoch
    reader.fetch_whole([(f.event_key, f.event_size) for f in files], into=True)
    if cache.epoch != before:  # files noted before left the cache: note again the ones wanted
        plan.chunk[:] = -1
        needed = list(dict.fromkeys(numbers.tolist()))
        files = [plan.files[i] for i in needed]
    plan.epoch = cache.epoch
    for i, f in zip(needed, files):
        entry = cache.files.get(f.event_key)
        if entry is None:  # too large to read whole, missing, short, or more than the cache holds
            return False
        plan.chunk[i], plan.base[i], plan.size[i] = entry[3], entry[1], entry[2]
    return True


def read_values(
    reader: ValueReader, plan: StepPlan, name: str, lo: int = 0, hi: int | None = None
) -> list[Array] | None:
    """The raw values of tensor ``name`` at the plan's steps ``steps[lo:hi]``, in order; None: read
    them step by step.

    Raises:
        CorruptRecordError: a damaged record (the first, in step order).
        EventFileUnavailable: from a one-at-a-time read that had to wait for its file.
    """
    located = plan.locate(name, lo, hi)
    if located is None:
        return None
    numbers, starts, lengths = located
    if not numbers.size:
        return []
    if (
        reader.ranged(plan.trial_bytes)
        and int(lengths.max()) < LARGE_RECORD  # large ones are read straight into their rows (read_many)
        and (plan.chunk[numbers] < 0).any()
    ):
        return _read_ranged(reader, plan, name, numbers, starts, lengths)
    if not _resolve(reader, plan, numbers):
        return None
    cache = reader.cache
    chunk, base, have = plan.chunk[numbers], plan.base[numbers], plan.size[numbers]
    chunk_numbers = [int(chunk[0])] if chunk.min() == chunk.max() else sorted(set(chunk.tolist()))
    chunks: dict[int, Chunk] = {}
    for number in chunk_numbers:
        data = cache.chunk(number)
        if data is None:  # cannot happen while the epoch holds; be safe
            return None
        cache.touch(number)
        chunks[number] = data
    buffers = {number: np.frombuffer(data, np.uint8) for number, data in chunks.items()}
    ready = (starts >= 0) & (starts + lengths <= have)
    where = base + starts  # record starts in their chunks
    files = plan.files
    decode = reader.decode_cached

    def one(k: int) -> Array:
        f = files[int(numbers[k])]
        key: str = f.event_key  # type: ignore[assignment]
        start, length = int(starts[k]), int(lengths[k])
        if ready[k]:
            number = int(chunk[k])
            return decode((chunks[number], int(base[k]), int(have[k]), number), key, start, length, name)
        return reader.read(key, start, length, f.event_size, name)

    def matches(candidates: Ints, layout: Any) -> Iterator[tuple[Ints, list[Array]]]:
        for number in chunk_numbers:
            chosen = candidates if len(chunk_numbers) == 1 else candidates[chunk[candidates] == number]
            if not chosen.size:
                continue
            buf = buffers[number]
            matched, content = match_layout(buf, where[chosen], lengths[chosen], layout)
            if matched.size:
                yield chosen[matched], _rows(gather_contents(buf, content, layout))

    return _decode_in_rounds(reader, name, len(numbers), ready, one, matches)


def _read_ranged(
    reader: ValueReader, plan: StepPlan, name: str, numbers: Ints, starts: Ints, lengths: Ints
) -> list[Array]:
    """:func:`read_values` for a trial larger than the file cache: only the byte ranges holding the
    tensor's records are fetched (:mod:`sdk_ext.trials.read.byte_ranges`), not the event files, then decoded a
    layout at a time as above. Costs the bytes of the records (and of their neighbours in a slab,
    which the next tensors use), whatever the files hold."""
    files = plan.files
    keys = plan.event_keys()  # a slab holds a row for every file of the plan: see them all
    slabs = reader.slabs
    window = slabs.window(len(keys))
    lo = int(starts.min()) // window * window if window else 0
    if window and int(starts.max()) < lo + window and int((starts + lengths).max()) <= lo + window + MARGIN:
        row = window + MARGIN  # every record in one slab
        buf, have = slabs.slab(plan, keys, lo, row)
        where = numbers * row + (starts - lo)
        ok = starts - lo + lengths <= have[numbers]
    else:
        records = [(files[i].event_key, s, n) for i, s, n in zip(numbers.tolist(), starts.tolist(), lengths.tolist())]
        buf, where, ok_list = slabs.gather(records)
        ok = np.array(ok_list, bool)
    data = buf.data.toreadonly()
    if slabs.unverified:  # records of files not checked whole: each against its own checksum
        unverified = slabs.unverified
        for k in np.flatnonzero(ok).tolist():
            f = files[int(numbers[k])]
            if f.event_key in unverified and not reader.record_ok(
                f.event_key, data, int(where[k]), int(starts[k]), int(lengths[k])
            ):
                ok[k] = False  # read alone, which names the damage
    decode = reader.decoder.decode

    def one(k: int) -> Array:
        f = files[int(numbers[k])]
        key: str = f.event_key  # type: ignore[assignment]
        start, length = int(starts[k]), int(lengths[k])
        if ok[k]:
            at = int(where[k])
            return decode(data, at, length, name=key, base=start - at, key=name)
        return reader.read(key, start, length, f.event_size, name)

    def matches(candidates: Ints, layout: Any) -> Iterator[tuple[Ints, list[Array]]]:
        matched, content = match_layout(buf, where[candidates], lengths[candidates], layout)
        if matched.size:
            yield candidates[matched], _rows(gather_contents(buf, content, layout))

    return _decode_in_rounds(reader, name, len(numbers), ok, one, matches)


def _decode_in_rounds(
    reader: ValueReader,
    name: str,
    n: int,
    ok: np.ndarray[Any, Any],
    one: Callable[[int], Array],
    matches: Callable[[Ints, Any], Iterable[tuple[Ints, list[Array]]]],
) -> list[Array]:
    """The ``n`` values, in order: decode the first pending record alone (``one``: it learns the record's
    layout), then every other pending record whose bytes are at hand (``ok``) and match that layout at
    once (``matches`` yields the positions it decoded and their rows); repeat with the next pending one.
    After ``_MAX_ROUNDS`` layouts the rest are decoded one at a time."""
    out: list[Array | None] = [None] * n
    pending = np.arange(n)
    rounds = 0
    # a layout the decoder knows already (the tensor's records read before): the first round needs no seed
    # (a record it does not fit, the first one included, stays pending and is decoded alone next)
    known = reader.decoder.layout(name)
    while pending.size:
        if known is None:
            seed = int(pending[0])
            out[seed] = one(seed)
            pending = pending[1:]
            if not ok[seed] or rounds >= _MAX_ROUNDS or not pending.size:
                continue
            layout = reader.decoder.layout(name)
            if layout is None:
                continue
        else:
            layout, known = known, None
        rounds += 1
        done = []
        for hits, rows in matches(pending[ok[pending]], layout):
            reader.batched += hits.size
            if hits.size == pending.size == n - int(pending[0]):  # the common case: one layout, one buffer, in order
                out[n - hits.size :] = rows
                return out  # type: ignore[return-value]
            first = int(hits[0])
            if int(hits[-1]) - first + 1 == hits.size:  # a run of steps (the files of a chunk, in order)
                out[first : first + hits.size] = rows
            else:
                for at, row in zip(hits.tolist(), rows):
                    out[at] = row
            done.append(hits)
        if done:
            left = np.ones(n, bool)
            left[np.concatenate(done)] = False
            pending = pending[left[pending]]
    return out  # type: ignore[return-value]


__all__ = ["read_values"]
