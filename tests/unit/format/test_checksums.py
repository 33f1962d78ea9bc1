"""sdk_ext's checksums in index files (sdk_ext.format.checksums, docs/FORMAT.md)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.format import checksums
from sdk_ext.format.checksums import crc32c
from sdk_ext.format.index import (
    IndexFile,
    ShapeEntry,
    TensorEntry,
    encode_index,
    encode_index_parts,
    parse_index,
)
from sdk_ext.modes import ModeKeys
from sdk_ext.trials.index.step_files import StepFileParser

EVENT = "events/000000000007/000000000007_worker_0.tfevents"
INDEX = IndexFile(ModeKeys.EVAL, 3, EVENT, (TensorEntry("a", 0, 100), TensorEntry("b", 100, 60), TensorEntry("a", 160, 90)),
                  (ShapeEntry("a", "a", (3, 4)),))
CHECKS = (0xDEADBEEF, [1, 0xFFFFFFFF, 0x0A0B0C0D])


def test_crc32c_known_answer_over_any_buffer() -> None:
    data = b"123456789"
    assert crc32c(data) == 0xE3069283
    assert crc32c(memoryview(data)) == crc32c(bytearray(data)) == crc32c(np.frombuffer(data, np.uint8).data)
    assert crc32c(data[4:], crc32c(data[:4])) == 0xE3069283  # continuing a CRC


def test_the_fastest_crc32c_installed_is_the_one_used() -> None:
    fastest = next(n for n in ("crc32c_rs", "crc32c", "google_crc32c") if importlib.util.find_spec(n) is not None)
    assert checksums.BACKEND == fastest
    if fastest == "crc32c_rs":  # the fallback (about 20 ms to import) is not imported for nothing
        code = "import sys, sdk_ext.trials, sdk_ext.hooks; print('crc32c' in sys.modules)"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
        assert done.stdout.strip() == "False"


def test_a_backend_that_disagrees_with_google_crc32c_is_not_used(monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A CRC package that takes a wrong code path on some CPU would write checksums no other reader
    accepts: the check at import skips it, with a warning, for the next one that agrees."""
    import types

    wrong = types.ModuleType("crc32c_rs")
    wrong.crc32c = lambda data, start=0: (checksums._any_buffer_crc or (lambda d, s: 0))(data, start) ^ 1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "crc32c_rs", wrong)
    with caplog.at_level("WARNING"):
        name, crc = checksums._fastest()
    assert name != "crc32c_rs"
    assert "disagrees" in caplog.text
    assert checksums._agrees(crc) if crc is not None else name == "google_crc32c"
    broken = types.ModuleType("crc32c_rs")
    broken.crc32c = lambda data, start=0: 1 // 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "crc32c_rs", broken)
    assert checksums._fastest()[0] != "crc32c_rs"


def _installed() -> dict[str, Callable[[Any, int], int]]:
    found: dict[str, Callable[[Any, int], int]] = {"sdk_ext": checksums.crc32c}
    for name in ("crc32c_rs", "crc32c"):
        try:
            found[name] = importlib.import_module(name).crc32c
        except ImportError:
            pass
    return found


@given(st.binary(max_size=70_000), st.integers(0, 2**32 - 1), st.integers(0, 64))
def test_every_crc32c_installed_agrees_with_google_crc32c(data: bytes, start: int, cut: int) -> None:
    """crc32c_rs picks a kernel per CPU and length (VPCLMULQDQ folds for long buffers, CRC32 for short
    tails): every length from bytes to tens of KiB, any starting CRC, any alignment of a numpy view."""
    import google_crc32c

    want = google_crc32c.extend(start, data[cut:])
    view = np.frombuffer(data, np.uint8)[cut:].data
    for name, crc in _installed().items():
        assert crc(data[cut:], start) == want, name
        assert crc(view, start) == want, name


@given(st.binary(max_size=300), st.binary(max_size=300), st.integers(0, 3))
def test_combine_gives_the_crc_of_the_concatenation(a: bytes, b: bytes, repeat: int) -> None:
    b = b * (1 + repeat * 1000)  # long second parts too: the shift is built from powers of two
    assert checksums.combine(crc32c(a), crc32c(b), len(b)) == crc32c(a + b)


def test_combine_of_a_large_record_and_a_writer_that_combines_from_its_threshold() -> None:
    rng = np.random.default_rng(3)
    head, record = rng.bytes(5000), rng.bytes(checksums_threshold() + 7)
    assert checksums.combine(crc32c(head), crc32c(record), len(record)) == crc32c(head + record)
    assert checksums.combine(0, crc32c(record), len(record)) == crc32c(record)  # nothing before: the record's own


def checksums_threshold() -> int:
    from sdk_ext.hooks.writer import COMBINE_FROM

    return COMBINE_FROM


def test_the_checksums_are_one_key_in_meta_and_strip_to_smdebugs_bytes() -> None:
    doc = encode_index(INDEX, checks=CHECKS)
    meta = json.loads(doc)["meta"]
    assert list(meta) == ["mode", "mode_step", "event_file_name", "sdk_ext_crc32c"]
    value = meta["sdk_ext_crc32c"]
    assert value[:32] == "deadbeef00000001ffffffff0a0b0c0d" and len(value) == 40
    assert checksums.strip(doc) == encode_index(INDEX)
    parsed = parse_index(doc, key="k")
    assert parsed.checks is not None and parsed.checks.file == 0xDEADBEEF
    assert [parsed.checks.record(k) for k in range(parsed.checks.count)] == CHECKS[1]
    head, tail = encode_index_parts(INDEX, checks=CHECKS)
    assert head + tail == doc and head.endswith(b'"}, ')


def test_the_index_checksum_covers_the_document_rotated() -> None:
    doc = encode_index(INDEX, checks=CHECKS)
    span = checksums.locate(doc)
    assert span is not None
    start, end = span
    claimed = int(doc[end - 8 : end], 16)
    assert crc32c(doc[end:] + doc[: end - 8]) == claimed


def test_every_flipped_bit_of_an_index_document_is_refused() -> None:
    doc = encode_index(INDEX, checks=CHECKS)
    parser = StepFileParser()
    parser.parse(doc, key="ok", step=7, worker="worker_0")  # the memo of its tail is warm from here on
    for at in range(len(doc)):
        for bit in range(8):
            damaged = bytearray(doc)
            damaged[at] ^= 1 << bit
            with pytest.raises(IndexReaderException, match="flip"):
                parse_index(bytes(damaged), key="flip")
            with pytest.raises(IndexReaderException, match="flip"):
                parser.parse(bytes(damaged), key="flip", step=7, worker="worker_0")


def test_parse_and_parse_parts_agree_and_give_each_record_its_checksum() -> None:
    head, tail = encode_index_parts(INDEX, checks=CHECKS)
    parser = StepFileParser()
    whole = parser.parse(head + tail, key="k", step=7, worker="worker_0")
    parts = parser.parse_parts(head, tail, key="k", step=7, worker="worker_0")
    for sf in (whole, parts):
        assert sf.checks is not None and sf.checks.file == CHECKS[0]
        assert [sf.record_crc(s) for s in (0, 100, 160, 5)] == [*CHECKS[1], None]
        assert sf.raw["a"] == (160, 90)  # the last entry of a name wins, as in smdebug
    damaged_head = head.replace(b'"mode_step": 3', b'"mode_step": 4')
    with pytest.raises(IndexReaderException, match="does not match"):
        parser.parse_parts(damaged_head, tail, key="k", step=7, worker="worker_0")  # the tail's memo is warm


def test_a_shapes_only_step_carries_the_index_checksum_alone() -> None:
    index = IndexFile(ModeKeys.TRAIN, 0, None, (), (ShapeEntry("t", "t", (7, 5)),))
    doc = encode_index(index, checks=(None, []))
    assert len(json.loads(doc)["meta"]["sdk_ext_crc32c"]) == 8
    assert parse_index(doc, key="k").checks is not None
    with pytest.raises(ValueError, match="record CRCs"):
        encode_index(INDEX, checks=(1, [2]))


def test_unknown_keys_are_damage_not_data() -> None:
    doc = encode_index(INDEX)
    with pytest.raises(IndexReaderException, match="unexpected top-level"):
        parse_index(doc.replace(b'"tensor_payload"', b'"tensor_paylaad"'), key="k")
    with pytest.raises(IndexReaderException, match="unexpected keys in meta"):
        parse_index(encode_index(INDEX, checks=CHECKS).replace(b"sdk_ext_crc32c", b"sdk_ext_crc33c"), key="k")
