"""Index files: where each tensor of one (global step, worker) lies in its event file.

One JSON document, ``json.dumps`` default separators, no trailing newline. Example (fixture b)::

    {"meta": {"mode": "EVAL", "mode_step": 0,
              "event_file_name": "events/000000000006/000000000006_worker_0.tfevents"},
     "tensor_payload": [{"tensorname": "Sequential_0.weight", "start_idx": 115, "length": 193}, ...],
     "shape_payload": [{"tensorname": "Sequential_0.weight", "originalname": "Sequential_0.weight",
                        "shape": [3, 4]}, ...]}

``start_idx``/``length`` cover the whole record (header + payload + footer). The global step and the
worker come from the file *name*; ``meta`` gives mode and mode step. A step that recorded only
shapes has a two-key meta (no ``event_file_name``) and no event file.

sdk_ext adds one key at the end of ``meta``, ``sdk_ext_crc32c``: the checksums of the event file,
of each record and of the document (:mod:`sdk_ext.format.checksums`). smdebug's reader ignores it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.format import checksums
from sdk_ext.format.checksums import IndexChecks
from sdk_ext.modes import ModeKeys

#: the top-level keys of an index document (any other is damage, e.g. a flipped bit in ``tensor_payload``)
TOP_LEVEL = frozenset(("meta", "tensor_payload", "shape_payload"))
#: the keys of ``meta`` (any other is damage, e.g. a flipped bit in the checksum key's name)
META_KEYS = frozenset(("mode", "mode_step", "event_file_name", checksums.KEY))


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """One record of the event file: the tensor ``name`` at byte range [start, start+length)."""

    name: str
    start: int
    length: int


@dataclass(frozen=True, slots=True)
class ShapeEntry:
    name: str
    original_name: str
    shape: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IndexFile:
    mode: ModeKeys
    mode_step: int
    event_file: str | None  # relative to the trial root; None when only shapes were recorded
    tensors: tuple[TensorEntry, ...] = ()
    shapes: tuple[ShapeEntry, ...] = field(default=())
    checks: IndexChecks | None = None  # sdk_ext's checksums, verified (None: the document has none)


#: per tensor name, the text of its tensor_payload entry up to its start offset (bounded: cleared when full)
_ENTRY_OPENINGS: dict[str, str] = {}
_OPENINGS_LIMIT = 4096


def encode_index(index: IndexFile, *, checks: tuple[int | None, list[int]] | None = None) -> bytes:
    """The index document, byte for byte as smdebug writes it (plus sdk_ext's checksums if ``checks``
    is given: see :func:`encode_index_parts`)."""
    head, tail = encode_index_parts(index, checks=checks)
    return head + tail


def encode_index_parts(
    index: IndexFile, *, checks: tuple[int | None, list[int]] | None = None
) -> tuple[bytes, bytes]:
    """The index document as ``(head, tail)``: the head is everything up to and including the ``meta``
    object and the separator after it (``{"meta": {...}, ``), the tail the rest, which repeats from step
    to step when the same tensors are saved (:mod:`sdk_ext.format.consolidated` stores it once).

    ``checks``: ``(CRC-32C of the event file or None, CRC-32C of each record in tensor order)``; the
    document then carries them and its own in ``meta`` (:mod:`sdk_ext.format.checksums`).
    """
    # json.dumps of {"meta": meta, "tensor_payload": [...], "shape_payload": [...]} (default separators), built
    # from pieces: a tensor entry's text before its numbers depends on its name only, and is kept per name
    meta = '{"mode": "' + index.mode.name + '", "mode_step": ' + str(int(index.mode_step))
    if index.event_file is not None:
        meta += ', "event_file_name": ' + json.dumps(index.event_file)
    entries = []
    for t in index.tensors:
        opening = _ENTRY_OPENINGS.get(t.name)
        if opening is None:
            if len(_ENTRY_OPENINGS) >= _OPENINGS_LIMIT:
                _ENTRY_OPENINGS.clear()
            opening = _ENTRY_OPENINGS[t.name] = '{"tensorname": ' + json.dumps(t.name) + ', "start_idx": '
        entries.append(f'{opening}{int(t.start)}, "length": {int(t.length)}}}')
    shapes = json.dumps([
        {"tensorname": s.name, "originalname": s.original_name, "shape": list(s.shape)} for s in index.shapes
    ]) if index.shapes else "[]"
    tail = ('"tensor_payload": [' + ", ".join(entries) + '], "shape_payload": ' + shapes + "}").encode("utf-8")
    if checks is None:
        return b'{"meta": ' + meta.encode("utf-8") + b"}, ", tail
    file_crc, record_crcs = checks
    if (file_crc is None) != (not record_crcs) or len(record_crcs) != (len(index.tensors) if file_crc is not None else 0):
        raise ValueError(f"checks give {len(record_crcs)} record CRCs for {len(index.tensors)} records")
    before = b'{"meta": ' + meta.encode("utf-8") + checksums.checksum_field(file_crc, record_crcs)
    return checksums.seal(before, tail), tail


def _fail(key: str, what: str) -> IndexReaderException:
    return IndexReaderException(f"{key}: {what}; the index file is corrupt (delete it or re-run the writer)", key=key)


def _int(value: object, key: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(key, f"{what} must be a non-negative integer, got {value!r}")
    return value


def parse_index(data: bytes, *, key: str = "<index>") -> IndexFile:
    """Parse and validate an index document.

    Raises:
        IndexReaderException: a checksum that does not match, unparsable JSON, no ``meta``, no payload
            lists, a top-level key smdebug's writer never writes, or malformed entries; the message
            names ``key``.
    """
    span = checksums.locate(data)
    checks = None if span is None else checksums.verify(data, span, key=key)
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise _fail(key, f"not valid JSON ({err})") from err
    except RecursionError as err:  # nesting deeper than the interpreter's limit: not a file any writer makes
        raise _fail(key, "not valid JSON (nested too deeply to parse)") from err
    if not isinstance(doc, dict):
        raise _fail(key, "top level is not an object")
    meta = doc.get("meta")
    if not isinstance(meta, dict) or not meta:
        raise _fail(key, "meta section is not present")
    if not meta.keys() <= META_KEYS:
        raise _fail(key, f"unexpected keys in meta {sorted(meta.keys() - META_KEYS)} (a writer makes only "
                    f"{', '.join(sorted(META_KEYS))})")
    if "tensor_payload" not in doc and "shape_payload" not in doc:
        raise _fail(key, "neither tensor_payload nor shape_payload is present")
    if not doc.keys() <= TOP_LEVEL:
        raise _fail(key, f"unexpected top-level keys {sorted(doc.keys() - TOP_LEVEL)} (a writer makes only "
                    "meta, tensor_payload and shape_payload)")
    try:
        mode = ModeKeys[str(meta.get("mode", "")).strip()]
    except KeyError as err:
        raise _fail(key, f"meta.mode {meta.get('mode')!r} is not TRAIN, EVAL, PREDICT or GLOBAL") from err
    mode_step = _int(meta.get("mode_step"), key, "meta.mode_step")
    event_file = meta.get("event_file_name")
    if event_file is not None and not isinstance(event_file, str):
        raise _fail(key, "meta.event_file_name is not a string")
    tensors = []
    for entry in doc.get("tensor_payload") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("tensorname"), str):
            raise _fail(key, f"bad tensor_payload entry {entry!r}")
        tensors.append(
            TensorEntry(
                entry["tensorname"],
                _int(entry.get("start_idx"), key, "start_idx"),
                _int(entry.get("length"), key, "length"),
            )
        )
    if tensors and event_file is None:
        raise _fail(key, "tensor_payload given but meta.event_file_name is missing")
    shapes = []
    for entry in doc.get("shape_payload") or ():
        if not isinstance(entry, dict) or not isinstance(entry.get("tensorname"), str):
            raise _fail(key, f"bad shape_payload entry {entry!r}")
        shape = entry.get("shape")
        if not isinstance(shape, list):
            raise _fail(key, f"shape of {entry['tensorname']!r} is not a list")
        shapes.append(
            ShapeEntry(
                entry["tensorname"],
                str(entry.get("originalname", entry["tensorname"])),
                tuple(_int(d, key, "shape dimension") for d in shape),
            )
        )
    if checks is not None and checks.file is not None and checks.count != len(tensors):
        raise _fail(key, f"its checksums cover {checks.count} records but tensor_payload lists {len(tensors)}")
    return IndexFile(mode, mode_step, event_file, tuple(tensors), tuple(shapes), checks)


__all__ = ["META_KEYS", "TOP_LEVEL", "IndexFile", "ShapeEntry", "TensorEntry", "encode_index", "encode_index_parts", "parse_index"]
