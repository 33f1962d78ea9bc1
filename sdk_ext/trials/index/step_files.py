"""Index files as :class:`StepFile` values: one parse per index document, shared where documents repeat.

An index file lists one worker's records at one step (see :mod:`sdk_ext.format.index`)::

    {"meta": {"mode": "TRAIN", "mode_step": 5, "event_file_name": "events/000000000005/000000000005_worker_0.tfevents"},
     "tensor_payload": [{"tensorname": "layer_00/weight", "start_idx": 0, "length": 514}, ...], "shape_payload": []}

Step after step a writer saves the same tensors with the same shapes, so everything after the
``meta`` object repeats byte for byte (the record lengths change only when the step's varint or
the mode step's digits get longer). :class:`StepFileParser` parses such a tail once and hands the
next step files with the same tail the same (never mutated) dicts: a step then costs one regex
match of its ``meta`` and one dict lookup instead of a JSON parse and a dict per tensor.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import chain
from operator import add

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.format import checksums
from sdk_ext.format.checksums import IndexChecks
from sdk_ext.format.index import META_KEYS, TOP_LEVEL, IndexFile, parse_index
from sdk_ext.format.paths import EVENTS_DIR, REDUCTION_PREFIX, parse_event_key, parse_reduction_name
from sdk_ext.format.paths import event_key as step_event_key
from sdk_ext.modes import ModeKeys

Location = tuple[int, int]  # (start, length) of a whole record in the step's event file
ReductionKey = tuple[str, bool]  # (op, abs)

_MODES = {m.name: m for m in ModeKeys}
_REDUCTION_BYTES = REDUCTION_PREFIX.encode()
_INT, _STR = {int}, {str}
_EVENTS = EVENTS_DIR + "/"
#: ``meta`` exactly as json.dumps writes it (smdebug and sdk_ext), first in the document; a string
#: without escapes or control characters, a non-negative integer without leading zeros
_META = re.compile(
    rb'\{"meta": \{"mode": "([A-Z]+)", "mode_step": (0|[1-9][0-9]{0,17}), '
    rb'"event_file_name": "([^"\\\x00-\x1f]*)"(\}, |, "' + checksums.KEY.encode() + rb'": ")'
)
_PLAIN = b"}, "  # the regex's last group when meta ends there (no checksum key)
_CLOSE = b'"}, '  # what follows the checksum value
#: bytes of document tails kept for reuse; past this the memo starts over
_TAILS_BYTES = 32 << 20

#: where each record's checksum is: {record start: its position in tensor_payload}, and how many records
Order = tuple[dict[int, int], int]
#: what a tail parses to: raw records, reductions, shapes, end of the last record, names, the record
#: order (documents with checksums) and the CRC of what follows a checksum value (:func:`checksums.tail_crc`)
_Parsed = tuple[dict[str, Location], dict[str, dict[ReductionKey, Location]], dict[str, tuple[int, ...]], int,
                frozenset[str], Order | None, int | None]


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
    checks: IndexChecks | None = None  # sdk_ext's checksums (verified with the document), None without
    order: Order | None = None  # with checks: which checksum belongs to the record at a start offset

    def record_crc(self, start: int) -> int | None:
        """The CRC-32C the index gives the record at ``start`` of the event file; None without checksums."""
        checks, order = self.checks, self.order
        if checks is None or order is None or checks.file is None:
            return None
        at = order[0].get(start)
        return None if at is None else checks.record(at)


def _count_mismatch(key: str, checks: int, records: int) -> IndexReaderException:
    return IndexReaderException(
        f"{key}: its checksums cover {checks} records but tensor_payload lists {records}; the index file is damaged",
        key=key,
    )


class _Malformed(Exception):
    """The fast parse met something unexpected; the validating parser explains it."""


class StepFileParser:
    """Turns index documents into StepFiles, sharing parsed reduction names, name sets and tails.

    The dicts of a StepFile may be shared with other step files: nobody may mutate them.
    """

    def __init__(self) -> None:
        self._reduction_names: dict[str, tuple[str, str, bool] | None] = {}
        self._name_sets: dict[frozenset[str], frozenset[str]] = {}
        self._tails: dict[bytes, _Parsed] = {}  # document after its meta -> what it parses to
        self._tails_bytes = 0
        #: the tail met last and what it parses to (in _tails too): step after step the next document has the
        #: same tail, and comparing it with the last one (a memcmp) costs a fifth of hashing it for the memo
        self._last: tuple[bytes, _Parsed] | None = None

    def parse(self, data: bytes, *, key: str, step: int, worker: str) -> StepFile:
        """Parse one index file (its sdk_ext checksum, if it has one, checked first).

        Raises:
            IndexReaderException: the document is corrupt or invalid, or its checksum does not match
                (names ``key``).
        """
        meta = _META.match(data)
        if meta is None or meta[4] == _PLAIN:
            return self._parse(meta, data[meta.end() :] if meta is not None else b"", data, key, step, worker)
        end = data.find(b'"', meta.end())
        if end < 0 or data[end : end + 4] != _CLOSE:
            return self._parse(None, b"", data, key, step, worker)
        return self._parse(meta, data[end + 4 :], data, key, step, worker, checked=data[: end + 4])

    def parse_parts(self, head: bytes, tail: bytes, *, key: str, step: int, worker: str) -> StepFile:
        """Parse the index document ``head + tail`` split where :mod:`sdk_ext.format.consolidated` splits it
        (the same tail object for many documents costs one hash). Raises as :meth:`parse`."""
        meta = _META.match(head)
        if meta is None:
            return self._parse(None, b"", None, key, step, worker, head=head + tail)
        if meta[4] == _PLAIN:
            if meta.end() != len(head):
                return self._parse(None, b"", None, key, step, worker, head=head + tail)
            return self._parse(meta, tail, None, key, step, worker, head=head)
        if not head.endswith(_CLOSE) or head.find(b'"', meta.end()) != len(head) - len(_CLOSE):
            return self._parse(None, b"", None, key, step, worker, head=head + tail)
        return self._parse(meta, tail, None, key, step, worker, head=head, checked=head)

    def _parse(self, meta: re.Match[bytes] | None, tail: bytes, data: bytes | None, key: str, step: int,
               worker: str, *, head: bytes = b"", checked: bytes | None = None) -> StepFile:
        """``meta``: the regex's match of the document's start; ``tail``: the rest; ``data``: the whole
        document, or None when it is ``head + tail`` (joined only if the memo of tails misses);
        ``checked``: the document's head when it ends with sdk_ext's checksum value (checked here
        against the head and ``tail``, before anything of the document is used)."""
        checks = None
        if meta is not None:
            last = self._last
            if last is not None and tail == last[0]:
                hit: _Parsed | None = last[1]
            else:
                hit = self._tails.get(tail)
                if hit is not None:
                    self._last = (tail, hit)
            if checked is not None:
                after = hit[6] if hit is not None and hit[6] is not None else checksums.tail_crc(tail)
                digits = len(checked) - len(_CLOSE)
                checks = checksums.check(checked[meta.end() : digits], memoryview(checked)[: digits - checksums.DIGITS],
                                         after, key=key)
            mode = _MODES.get(meta[1].decode())
            if hit is not None and checks is not None and checks.file is not None:
                if hit[5] is None:  # the memo was made from a document without checksums: parse this one
                    hit = None
                elif checks.count != hit[5][1]:
                    raise _count_mismatch(key, checks.count, hit[5][1])
            if hit is not None and mode is not None:
                raw, reductions, shapes, end, names, order, _ = hit
                event_key = _event_key(meta[3], key, step, worker)
                return StepFile(key, step, worker, mode, int(meta[2]), event_key, end, raw, reductions, shapes, names,
                                checks, order if checks is not None else None)
        if data is None:
            data = head + tail
        if checked is None:  # the regex did not find a checksum: one elsewhere in meta is checked all the same
            span = checksums.locate(data)
            if span is not None:
                checks = checksums.verify(data, span, key=key)
        try:
            sf = self._fast(data, key, step, worker, checks)
        except (_Malformed, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            # The validating parser raises a precise error, or accepts what the fast one refused.
            sf = self._from_index(parse_index(data, key=key), key, step, worker)
        if meta is not None:
            self._memo(meta, tail, sf)
        return sf

    def _memo(self, meta: re.Match[bytes], tail: bytes, sf: StepFile) -> None:
        """Remember what ``tail`` parses to, if the document's meta is the one the regex read."""
        if (
            sf.mode is not _MODES.get(meta[1].decode())
            or sf.mode_step != int(meta[2])
            or sf.event_key != _event_key(meta[3], key=sf.key, step=sf.step, worker=sf.worker)
            or b'"meta"' in tail  # a second meta would win over the first
        ):
            return
        if self._tails_bytes + len(tail) > _TAILS_BYTES:
            self._tails.clear()
            self._tails_bytes = 0
        after = checksums.tail_crc(tail) if sf.checks is not None else None
        parsed = self._tails[tail] = (sf.raw, sf.reductions, sf.shapes, sf.event_size, sf.names, sf.order, after)
        self._tails_bytes += len(tail)
        self._last = (tail, parsed)

    def _reduction(self, name: str) -> tuple[str, str, bool] | None:
        try:
            return self._reduction_names[name]
        except KeyError:
            parsed = self._reduction_names[name] = parse_reduction_name(name)
            return parsed

    def _fast(self, data: bytes, key: str, step: int, worker: str, checks: IndexChecks | None) -> StepFile:
        doc = json.loads(data)
        if not doc.keys() <= TOP_LEVEL:
            raise _Malformed
        meta = doc["meta"]
        if not meta.keys() <= META_KEYS:
            raise _Malformed
        mode = _MODES.get(meta["mode"]) or _MODES[meta["mode"].strip()]
        mode_step = meta["mode_step"]
        if type(mode_step) is not int or mode_step < 0:
            raise _Malformed
        event_key = meta.get("event_file_name")
        payload = doc.get("tensor_payload") or ()
        # a repeated name: the last entry wins, as in smdebug
        raw: dict[str, Location] = {e["tensorname"]: (e["start_idx"], e["length"]) for e in payload}
        end = 0
        if raw:
            numbers = list(chain.from_iterable(raw.values()))
            # types checked in C (map/set), not per entry in Python; bool is not int here
            if type(event_key) is not str or set(map(type, numbers)) != _INT or set(map(type, raw)) != _STR:
                raise _Malformed
            if min(numbers) < 0:
                raise _Malformed
            end = max(map(add, numbers[::2], numbers[1::2]))
        reductions: dict[str, dict[ReductionKey, Location]] = {}
        if _REDUCTION_BYTES in data:
            for name in [n for n in raw if REDUCTION_PREFIX in n]:
                parsed = self._reduction(name)
                if parsed is not None:
                    reductions.setdefault(parsed[0], {})[(parsed[1], parsed[2])] = raw.pop(name)
        shapes: dict[str, tuple[int, ...]] = {}
        for entry in doc.get("shape_payload") or ():
            shape = entry["shape"]
            name = entry["tensorname"]
            if type(name) is not str or type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
                raise _Malformed
            shapes[name] = tuple(shape)
        if "tensor_payload" not in doc and "shape_payload" not in doc:
            raise _Malformed
        order = None
        if checks is not None and checks.file is not None:
            order = ({e["start_idx"]: k for k, e in enumerate(payload)}, len(payload))
            if checks.count != len(payload):
                raise _count_mismatch(key, checks.count, len(payload))
        return self._step_file(key, step, worker, mode, mode_step, event_key, end, raw, reductions, shapes, checks,
                               order)

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
        checks = index.checks
        order = None
        if checks is not None and checks.file is not None:
            order = ({t.start: k for k, t in enumerate(index.tensors)}, len(index.tensors))
        return self._step_file(
            key, step, worker, index.mode, index.mode_step, index.event_file, end, raw, reductions, shapes, checks,
            order,
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
        checks: IndexChecks | None = None,
        order: Order | None = None,
    ) -> StepFile:
        if event_key is not None:
            event_key = _event_key(event_key, key, step, worker)
        names = frozenset(raw)
        if reductions or shapes:
            names = names.union(reductions, shapes)
        names = self._name_sets.setdefault(names, names)
        return StepFile(key, step, worker, mode, mode_step, event_key, end, raw, reductions, shapes, names, checks, order)




def _relative(event_key: str) -> str:
    """The event file key relative to the trial root (smdebug writes it so; keep that part of a full path or URI)."""
    if event_key.startswith(_EVENTS):
        return event_key
    at = event_key.rfind("/" + _EVENTS)
    return event_key[at + 1 :] if at >= 0 else event_key


#: worker -> (whether its event files' usual names pass _event_key's checks, which depends on the worker
#: only; what follows the step in them)
_USUAL: dict[str, tuple[bool, str]] = {}


def _usual(worker: str) -> tuple[bool, str]:
    name = step_event_key(0, worker)
    ok = "\\" not in name and "\x00" not in name and parse_event_key(name) == (0, worker)
    found = (ok, name[len(f"{EVENTS_DIR}/{0:012d}/{0:012d}") :])
    if len(_USUAL) < 4096:
        _USUAL[worker] = found
    return found


def _event_key(name: str | bytes, key: str, step: int, worker: str) -> str:
    """``meta.event_file_name`` of the index file ``key`` (of global ``step``, ``worker``) as a key under
    the trial root, checked: it must be that step's and worker's event file under ``events/``, so no
    index can make the reader open a file outside the trial or another step's records.

    An empty name (smdebug's own trial-building test helpers write one) means that step's and worker's
    event file at its usual place: the step stays listed, as in smdebug, and its values are read from there.

    Raises:
        IndexReaderException: names the index file and the offending name.
    """
    if not name:
        return step_event_key(step, worker)
    usual = _USUAL.get(worker)
    if usual is None:
        usual = _usual(worker)
    if usual[0]:  # the worker's usual names pass the checks below: is this one its usual name?
        expected = f"{EVENTS_DIR}/{step:012d}/{step:012d}{usual[1]}"
        if name == expected if isinstance(name, str) else name == expected.encode():
            return expected
    if isinstance(name, bytes):
        try:
            name = name.decode()
        except UnicodeDecodeError as err:
            raise IndexReaderException(f"{key}: meta.event_file_name is not UTF-8; the index file is corrupt") from err
    relative = _relative(name)
    parts = relative.split("/")
    if (
        not relative.startswith(_EVENTS)
        or "\\" in relative
        or "\x00" in relative
        or any(p in ("", ".", "..") for p in parts)
        or parse_event_key(relative) != (step, worker)
    ):
        raise IndexReaderException(
            f"{key}: meta.event_file_name {name!r} is not the event file of step {step} of {worker} under "
            f"{EVENTS_DIR}/ (a path outside the trial, or another step's file); the index file is corrupt"
        )
    return relative


__all__ = ["Location", "ReductionKey", "StepFile", "StepFileParser"]
