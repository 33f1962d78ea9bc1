"""Coalescing ranged reads: fewer GETs, the same bytes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdk_ext.storage.base import ReadRequest
from sdk_ext.storage.ranges import plan_reads, split_span

OBJECTS = {"a": bytes(range(256)) * 4, "b": b"0123456789" * 50, "empty": b""}


def _serve(requests, *, max_gap, max_span):
    """What plan + split returns when each span is served by slicing the object, like S3 does."""
    results = [b""] * len(requests)
    spans = plan_reads(requests, max_gap=max_gap, max_span=max_span)
    for span in spans:
        data = OBJECTS[span.key][span.start :] if span.end is None else OBJECTS[span.key][span.start : span.end]
        split_span(span, data, results)
    return results, spans


def _expected(r):
    data = OBJECTS[r.key]
    return data[r.start :] if r.length is None else data[r.start : r.start + r.length]


def test_adjacent_ranges_of_one_key_share_one_get():
    requests = [ReadRequest("a", 100, 20), ReadRequest("a", 0, 50), ReadRequest("a", 50, 50)]
    results, spans = _serve(requests, max_gap=0, max_span=1 << 20)
    assert [(s.key, s.start, s.end) for s in spans] == [("a", 0, 120)]
    assert results == [_expected(r) for r in requests]


def test_far_apart_ranges_and_other_keys_get_their_own_get():
    requests = [ReadRequest("a", 0, 10), ReadRequest("b", 0, 10), ReadRequest("a", 500, 10)]
    _, spans = _serve(requests, max_gap=100, max_span=1 << 20)
    assert [(s.key, s.start, s.end) for s in spans] == [("a", 0, 10), ("a", 500, 510), ("b", 0, 10)]


def test_span_limit_splits_a_long_run_of_adjacent_ranges():
    requests = [ReadRequest("a", i * 100, 100) for i in range(10)]
    results, spans = _serve(requests, max_gap=0, max_span=300)
    assert [s.length for s in spans] == [300, 300, 300, 100]
    assert results == [_expected(r) for r in requests]


def test_open_ended_request_swallows_later_ranges_and_reads_to_the_end():
    requests = [ReadRequest("a", 700, 5), ReadRequest("a", 600), ReadRequest("a", 10, 5)]
    results, spans = _serve(requests, max_gap=0, max_span=1 << 20)
    assert [(s.start, s.end) for s in spans] == [(10, 15), (600, None)]
    assert results == [_expected(r) for r in requests]


def test_zero_length_requests_need_no_get_and_past_the_end_reads_are_short():
    requests = [ReadRequest("a", 5, 0), ReadRequest("b", 495, 10), ReadRequest("empty", 0, 3)]
    results, spans = _serve(requests, max_gap=0, max_span=1 << 20)
    assert [s.key for s in spans] == ["b", "empty"]
    assert results == [b"", b"56789", b""]


def test_negative_range_is_rejected_with_the_key():
    with pytest.raises(ValueError, match="'a'"):
        plan_reads([ReadRequest("a", -1, 3)], max_gap=0, max_span=10)


_request = st.builds(
    ReadRequest,
    key=st.sampled_from(["a", "b", "empty"]),
    start=st.integers(0, 1100),
    length=st.one_of(st.none(), st.integers(0, 300)),
)


@given(st.lists(_request, max_size=30), st.integers(0, 500), st.integers(1, 2000))
def test_any_plan_returns_exactly_the_requested_bytes_in_request_order(requests, max_gap, max_span):
    results, spans = _serve(requests, max_gap=max_gap, max_span=max_span)
    assert results == [_expected(r) for r in requests]
    # every non-empty request is served by exactly one span, and no two spans of a key overlap
    served = sorted(p.index for s in spans for p in s.pieces)
    assert served == [i for i, r in enumerate(requests) if r.length != 0]
    for x in spans:
        for y in spans:
            if x is not y and x.key == y.key and x.start <= y.start:
                assert x.end is not None and x.end <= y.start
