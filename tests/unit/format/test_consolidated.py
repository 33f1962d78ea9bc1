"""The consolidated index (sdk_ext's addition to the format): what the encoder writes parses back to the
same index documents, a repeated tail is stored once, and damage is detected, never read as data."""

from __future__ import annotations

import pytest

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.format.consolidated import (
    FOOTER_SIZE,
    MAGIC,
    ConsolidatedEncoder,
    consolidated_key,
    parse_consolidated,
    parse_consolidated_key,
)
from sdk_ext.format.index import IndexFile, ShapeEntry, TensorEntry, encode_index, encode_index_parts
from sdk_ext.format.paths import event_key
from sdk_ext.modes import ModeKeys


def document(step: int, mode: ModeKeys = ModeKeys.TRAIN, names: tuple[str, ...] = ("a", "b")) -> IndexFile:
    entries = tuple(TensorEntry(n, 100 * k, 100) for k, n in enumerate(names))
    return IndexFile(mode, step, event_key(step, "worker_0"), entries, (ShapeEntry("a", "a", (2, 5)),))


def encode(docs: list[tuple[int, IndexFile]], worker: str = "worker_0") -> bytes:
    enc = ConsolidatedEncoder()
    out = [enc.start()]
    for step, doc in docs:
        out += enc.add(step, *encode_index_parts(doc))
    out.append(enc.finish(worker))
    return b"".join(out)


def test_index_parts_join_to_the_document_smdebug_writes() -> None:
    for doc in (document(7), IndexFile(ModeKeys.EVAL, 3, None, (), (ShapeEntry("t", "t", (7, 5)),))):
        head, tail = encode_index_parts(doc)
        assert head + tail == encode_index(doc)
        assert head.startswith(b'{"meta": {') and head.endswith(b"}, ") and tail.startswith(b'"tensor_payload"')


def test_round_trip_gives_every_document_back_in_order() -> None:
    docs = [(s, document(s, ModeKeys.EVAL if s % 5 == 4 else ModeKeys.TRAIN)) for s in range(40)]
    parsed = parse_consolidated(encode(docs, "worker_3"))
    assert parsed.worker == "worker_3"
    assert [(s, h + t) for s, h, t in parsed.entries] == [(s, encode_index(d)) for s, d in docs]


def test_a_repeated_tail_is_stored_once_and_shared() -> None:
    same = [(s, document(s)) for s in range(200)]
    data = encode(same)
    heads = sum(len(encode_index_parts(d)[0]) for _, d in same)
    tail = len(encode_index_parts(document(0))[1])
    assert len(data) <= len(MAGIC) + heads + tail + 200 * 16 + 100 + FOOTER_SIZE  # one tail; 16 bytes/entry of trailer
    assert len(data) < sum(len(encode_index(d)) for _, d in same) / 2
    parsed = parse_consolidated(data)
    assert len({id(t) for _, _, t in parsed.entries}) == 1
    # two alternating layouts (TRAIN and EVAL steps saving different tensors) are two tails, not one per step
    mixed = [(s, document(s, names=("a", "b") if s % 2 else ("c",))) for s in range(100)]
    assert len({id(t) for _, _, t in parse_consolidated(encode(mixed)).entries}) == 2


def test_a_document_stored_without_a_tail_round_trips() -> None:
    enc = ConsolidatedEncoder()
    whole = encode_index(document(1))
    data = enc.start() + b"".join(enc.add(1, whole)) + enc.finish("worker_0")
    assert parse_consolidated(data).entries == [(1, whole, b"")]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d[: len(d) // 2], "footer is missing"),
        (lambda d: d[:-1], "footer is missing"),
        (lambda d: b"X" + d[1:], "magic line"),
        (lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:], "CRC32C"),
        (lambda d: d[:-FOOTER_SIZE - 3] + b"}}}" + d[-FOOTER_SIZE:], "CRC32C"),
        (lambda d: b"", "too short"),
    ],
)
def test_damage_is_detected_and_named(damage, message: str) -> None:  # type: ignore[no-untyped-def]
    data = encode([(s, document(s)) for s in range(5)])
    with pytest.raises(IndexReaderException, match=message) as err:
        parse_consolidated(damage(data), key="s3://b/t/consolidated/worker_0_index.sdkidx")
    assert "s3://b/t/consolidated/worker_0_index.sdkidx" in str(err.value)
    assert "one by one" in str(err.value)  # what happens instead


def test_a_trailer_that_disagrees_with_the_body_is_refused() -> None:
    import json

    import google_crc32c

    data = encode([(s, document(s)) for s in range(3)])
    offset = int(data[-FOOTER_SIZE:][:16], 16)
    trailer = json.loads(data[offset:-FOOTER_SIZE])
    trailer["entries"][1][1] += 5  # a head longer than written
    body = data[:offset] + json.dumps(trailer).encode()
    forged = body + b"%016x%08x%08x" % (offset, len(body) - offset, google_crc32c.value(body)) + b"SDKIDX1\n"
    with pytest.raises(IndexReaderException, match="entries"):
        parse_consolidated(forged)


def test_key_is_outside_every_prefix_smdebug_lists() -> None:
    key = consolidated_key("worker_0")
    assert key == "consolidated/worker_0_index.sdkidx"
    # smdebug lists S3 with the prefixes "index" (no slash), "events/", "collections/000000000/" and the marker
    assert not key.startswith(("index", "events", "collections", "training_job_end"))
    assert parse_consolidated_key(key) == "worker_0"
    device = "/job:worker/replica:0/task:1/device:GPU:0"
    assert parse_consolidated_key(consolidated_key(device)) == device
    assert parse_consolidated_key("index/000000000/000000000001_worker_0.json") is None
    assert MAGIC.endswith(b"\n")


def test_encoder_misuse_raises() -> None:
    enc = ConsolidatedEncoder()
    with pytest.raises(RuntimeError):
        enc.add(0, b"{}")
    enc.start()
    with pytest.raises(RuntimeError):
        enc.start()
