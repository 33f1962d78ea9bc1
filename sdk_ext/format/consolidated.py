"""The consolidated index: every index file one worker wrote, in one object (sdk_ext's addition to the format).

Opening a trial on S3 costs one GET per index file (one per saved step per worker) when each is read
on its own. A writer that closes normally therefore also writes, per worker::

    consolidated/{W}_index.sdkidx

holding the bytes of each index file it committed, so a reader of a finished trial fetches one object
per worker instead. It adds to the format; it changes nothing in it: the index files are still
written, and smdebug and SageMaker's rule containers never read this object (they list ``index``,
``events/``, ``collections/`` and ``training_job_end.ts``; smdebug lists S3 with the prefix ``index``
*without* a slash, which is why this key must not start with ``index``).

A reader uses an entry only for an index file that its own listing shows with the same size, so
the listing stays the truth: an index file missing from this object (a step written after it, or by
another run) is read on its own, and an entry for a file that is not listed is ignored.

Layout (every number little work to parse; the whole object is read at once)::

    MAGIC                      b"sdk_ext consolidated index 1\\n"
    body                       per entry, in order: its head, then its tail if no earlier entry has it
    trailer                    JSON {"worker": W, "entries": [[step, head length, tail number], ...],
                                     "tails": [tail length, ...]}
    footer (FOOTER_SIZE bytes)  "%016x%08x%08x" % (trailer offset, trailer length, CRC32C of every
                               byte before the footer), then b"SDKIDX1\\n"

An entry's index document is its head followed by tail number ``n`` (``-1``: the head is the whole
document). The head is the document up to and including its ``meta`` object (what changes from step
to step), the tail is the rest (the tensors' places, the same step after step), so a trial that
saves the same tensors every step stores its tail once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import google_crc32c

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.format.paths import deserialize_worker, serialize_worker

CONSOLIDATED_DIR = "consolidated"
MAGIC = b"sdk_ext consolidated index 1\n"
_FOOTER_TAG = b"SDKIDX1\n"
FOOTER_SIZE = 16 + 8 + 8 + len(_FOOTER_TAG)
_FOOTER = re.compile(rb"([0-9a-f]{16})([0-9a-f]{8})([0-9a-f]{8})" + re.escape(_FOOTER_TAG) + rb"\Z")
_KEY = re.compile(r"(?:^|/)" + CONSOLIDATED_DIR + r"/(.+)_index\.sdkidx$")
_extend: Callable[[int, bytes], int] = google_crc32c.extend  # CRC32C of more bytes after a CRC so far
#: tails an encoder compares a new one with (a job alternating TRAIN and EVAL steps has two)
RECENT_TAILS = 8


def consolidated_key(worker: str) -> str:
    """The key of ``worker``'s consolidated index under the trial root."""
    return f"{CONSOLIDATED_DIR}/{serialize_worker(worker)}_index.sdkidx"


def parse_consolidated_key(key: str) -> str | None:
    """The worker of a consolidated index key, or None."""
    match = _KEY.search(key)
    return None if match is None else deserialize_worker(match.group(1))


class ConsolidatedEncoder:
    """Builds a consolidated index piece by piece, as a writer commits its index files.

    Nothing is kept but the last few distinct tails (to store a repeated one once) and three numbers
    per entry; the bytes go to the caller, which appends them to the object being written::

        enc = ConsolidatedEncoder()
        out.write(enc.start())
        for step, head, tail in committed:
            for piece in enc.add(step, head, tail):
                out.write(piece)
        out.write(enc.finish("worker_0"))
    """

    def __init__(self) -> None:
        self._crc = 0  # CRC32C of every byte handed out so far
        self._offset = 0
        self._entries: list[tuple[int, int, int]] = []
        self._tail_lengths: list[int] = []
        self._recent: list[tuple[bytes, int]] = []  # (tail, number), most recent first

    @property
    def entries(self) -> int:
        return len(self._entries)

    def _out(self, data: bytes) -> bytes:
        self._crc = _extend(self._crc, data)
        self._offset += len(data)
        return data

    def start(self) -> bytes:
        """The first bytes of the object."""
        if self._offset:
            raise RuntimeError("ConsolidatedEncoder.start() called twice")
        return self._out(MAGIC)

    def add(self, step: int, head: bytes, tail: bytes = b"") -> list[bytes]:
        """Record the index file of ``step`` (its document is ``head + tail``); the bytes to append."""
        if not self._offset:
            raise RuntimeError("ConsolidatedEncoder.add() before start()")
        pieces = [self._out(bytes(head))]
        number = -1
        if tail:
            for at, (known, known_number) in enumerate(self._recent):
                if len(known) == len(tail) and known == tail:
                    number = known_number
                    if at:
                        self._recent.insert(0, self._recent.pop(at))
                    break
            else:
                number = len(self._tail_lengths)
                self._tail_lengths.append(len(tail))
                tail = bytes(tail)
                pieces.append(self._out(tail))
                self._recent.insert(0, (tail, number))
                del self._recent[RECENT_TAILS:]
        self._entries.append((step, len(head), number))
        return pieces

    def finish(self, worker: str) -> bytes:
        """The trailer and footer: the last bytes of the object."""
        trailer = json.dumps(
            {"worker": worker, "entries": self._entries, "tails": self._tail_lengths}, separators=(",", ":")
        ).encode()
        offset = self._offset
        self._out(trailer)
        footer = b"%016x%08x%08x" % (offset, len(trailer), self._crc) + _FOOTER_TAG
        return trailer + footer


@dataclass(frozen=True, slots=True)
class ConsolidatedIndex:
    """A parsed consolidated index: ``entries`` are ``(global step, head, tail)``, in the order written.

    Entries with the same tail share one ``bytes`` object.
    """

    worker: str
    entries: list[tuple[int, bytes, bytes]]


def _fail(key: str, what: str) -> IndexReaderException:
    return IndexReaderException(
        f"{key}: {what}; the consolidated index is damaged (the reader reads the index files one by one instead; "
        "delete the object to silence this)"
    )


def parse_consolidated(data: bytes | memoryview, *, key: str = "<consolidated index>") -> ConsolidatedIndex:
    """Parse and check a consolidated index (magic, CRC32C of everything before the footer, trailer).

    Raises:
        IndexReaderException: not a consolidated index, cut short, or damaged; the message names ``key``.
    """
    view = memoryview(data)
    if len(view) < len(MAGIC) + FOOTER_SIZE or bytes(view[: len(MAGIC)]) != MAGIC:
        raise _fail(key, "it does not start with the consolidated index's magic line or is too short")
    footer = _FOOTER.match(bytes(view[-FOOTER_SIZE:]))
    if footer is None:
        raise _fail(key, "its footer is missing (the object is cut short)")
    offset, length, crc = (int(g, 16) for g in footer.groups())
    end = len(view) - FOOTER_SIZE
    if offset + length != end or offset < len(MAGIC):
        raise _fail(key, f"its footer places the trailer at {offset}+{length}, but the footer starts at {end}")
    if _extend(0, bytes(view[:end])) != crc:  # the C implementation takes bytes only
        raise _fail(key, "its CRC32C does not match its bytes")
    try:
        trailer = json.loads(bytes(view[offset:end]))
        worker = trailer["worker"]
        entries = trailer["entries"]
        tail_lengths = trailer["tails"]
        if not isinstance(worker, str) or not isinstance(entries, list) or not isinstance(tail_lengths, list):
            raise TypeError("worker, entries or tails has the wrong type")
    except (ValueError, KeyError, TypeError) as err:
        raise _fail(key, f"its trailer is not what a writer makes ({err})") from err
    tails: list[bytes] = []
    parsed: list[tuple[int, bytes, bytes]] = []
    at = len(MAGIC)
    try:
        for step, head_length, number in entries:
            if type(step) is not int or type(head_length) is not int or type(number) is not int:
                raise TypeError(f"entry {[step, head_length, number]!r} is not three integers")
            if step < 0 or head_length < 0 or number < -1 or number > len(tails):
                raise ValueError(f"entry {[step, head_length, number]!r} is out of range")
            head = bytes(view[at : at + head_length])
            at += head_length
            if number == len(tails):  # its first use: the tail follows the head
                tail_length = tail_lengths[number]
                if type(tail_length) is not int or tail_length <= 0:
                    raise ValueError(f"tail length {tail_length!r} is not a positive integer")
                tails.append(bytes(view[at : at + tail_length]))
                at += tail_length
            parsed.append((step, head, tails[number] if number >= 0 else b""))
            if at > offset:
                raise ValueError("the entries run past the trailer")
    except (ValueError, TypeError, IndexError) as err:
        raise _fail(key, f"its entries do not match its body ({err})") from err
    if at != offset:
        raise _fail(key, f"its entries cover {at - len(MAGIC)} bytes of a body of {offset - len(MAGIC)}")
    return ConsolidatedIndex(worker, parsed)


__all__ = [
    "CONSOLIDATED_DIR",
    "FOOTER_SIZE",
    "MAGIC",
    "ConsolidatedEncoder",
    "ConsolidatedIndex",
    "consolidated_key",
    "parse_consolidated",
    "parse_consolidated_key",
]
