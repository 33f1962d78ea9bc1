"""Planning ranged reads: many small byte ranges become a few GETs.

A trial asks for one record per tensor, and a step's records sit next to each other in one event
file, so reading a step tensor by tensor is many adjacent ranges of the same object. Each GET costs a
round trip (tens of ms on S3) while bytes are cheap, so ranges of the same key closer than ``max_gap``
are fetched together, as long as the merged span stays within ``max_span`` bytes.

Pure: no I/O. :func:`plan_reads` makes the spans; :func:`split_span` cuts a span's bytes back into
the requested pieces. An open-ended request (``length=None``, "to the end of the object") makes its
span open-ended too. A span that comes back short (the object is shorter than asked) yields short or
empty pieces, like reading past the end of a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sdk_ext.storage.base import ReadRequest


@dataclass(frozen=True, slots=True)
class Piece:
    """One request inside a span: where its bytes start relative to the span."""

    index: int  # position in the caller's request list
    offset: int  # from span.start
    length: int | None  # None: to the end of the span


@dataclass(slots=True)
class Span:
    """One GET: bytes ``[start, end)`` of ``key`` (``end=None``: to the end of the object)."""

    key: str
    start: int
    end: int | None
    pieces: list[Piece] = field(default_factory=list)

    @property
    def length(self) -> int | None:
        return None if self.end is None else self.end - self.start


def _end(request: ReadRequest) -> int | None:
    return None if request.length is None else request.start + request.length


def plan_reads(requests: Sequence[ReadRequest], *, max_gap: int, max_span: int) -> list[Span]:
    """Group ``requests`` into as few spans as the limits allow.

    Zero-length requests get no span (their answer is ``b""``). Spans come out ordered by key, then
    start. Overlapping ranges always share a span; an open-ended one swallows every later range of
    its key.

    Raises:
        ValueError: a negative start or length.
    """
    by_key: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        if r.start < 0 or (r.length is not None and r.length < 0):
            raise ValueError(f"invalid byte range for {r.key!r}: start={r.start}, length={r.length}")
        if r.length == 0:
            continue
        by_key.setdefault(r.key, []).append(i)

    spans: list[Span] = []
    for key in sorted(by_key):
        order = sorted(by_key[key], key=lambda i: (requests[i].start, _end(requests[i]) is None))
        current: Span | None = None
        for i in order:
            r = requests[i]
            end = _end(r)
            if current is not None and _fits(current, r.start, end, max_gap=max_gap, max_span=max_span):
                if current.end is not None:
                    current.end = None if end is None else max(current.end, end)
            else:
                current = Span(key, r.start, end)
                spans.append(current)
            current.pieces.append(Piece(i, r.start - current.start, r.length))
    return spans


def _fits(span: Span, start: int, end: int | None, *, max_gap: int, max_span: int) -> bool:
    if span.end is None or start < span.end:
        return True  # already covered (or overlapping): never fetch the same bytes twice
    if start - span.end > max_gap:
        return False
    return end is None or end - span.start <= max_span  # an open-ended read is as long as it must be


def split_span(span: Span, data: bytes, results: list[bytes]) -> None:
    """Store each piece of ``span`` (whose bytes are ``data``) at its index in ``results``."""
    view = memoryview(data)
    for p in span.pieces:
        chunk = view[p.offset :] if p.length is None else view[p.offset : p.offset + p.length]
        results[p.index] = bytes(chunk)


__all__ = ["Piece", "Span", "plan_reads", "split_span"]
