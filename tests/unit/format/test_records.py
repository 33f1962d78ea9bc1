import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdk_ext.exceptions import CorruptRecordError
from sdk_ext.format.records import (
    MAGIC_FOOTER,
    crc32c,
    encode_record,
    iter_records,
    masked_crc32c,
    read_record,
    scan_records,
)


def test_crc32c_known_answer():
    assert crc32c(b"123456789") == 0xE3069283


def test_masked_crc_of_length_header_matches_format_vector():
    assert masked_crc32c(bytes.fromhex("6200000000000000")) == 0x6F60FD79


def test_magic_footer_is_smdebugs_constant():
    assert MAGIC_FOOTER == 0x062DC0B3
    assert encode_record(b"x")[-4:] == bytes.fromhex("b3c02d06")


@given(st.binary(max_size=2000), st.booleans())
def test_record_round_trip_and_exact_size(payload, checksum):
    rec = encode_record(payload, checksum=checksum)
    assert len(rec) == 8 + 4 + len(payload) + 4
    assert struct.unpack_from("<Q", rec)[0] == len(payload)
    assert bytes(read_record(rec, 0, expect_length=len(rec))) == payload
    assert [bytes(p) for p in iter_records(rec)] == [payload]


@given(st.lists(st.binary(max_size=300), max_size=6), st.data())
def test_truncation_at_every_cut_point_yields_only_complete_records(payloads, data):
    blob = b"".join(encode_record(p) for p in payloads)
    cut = data.draw(st.integers(0, len(blob)))
    spans, resume = scan_records(blob[:cut])
    complete = [s for s in spans]
    # every returned record is complete and a prefix of the original sequence
    assert [bytes(blob[s.payload_offset : s.payload_offset + s.payload_length]) for s in complete] == payloads[
        : len(complete)
    ]
    assert resume == sum(s.length for s in complete)
    # once the rest arrives, scanning resumes where it stopped and finds the others
    more, end = scan_records(blob, start=resume)
    assert len(complete) + len(more) == len(payloads)
    assert end == len(blob)


def test_corrupt_length_crc_names_file_and_offset():
    blob = bytearray(encode_record(b"first") + encode_record(b"second"))
    second = len(encode_record(b"first"))
    blob[second + 9] ^= 0xFF
    with pytest.raises(CorruptRecordError) as info:
        list(iter_records(bytes(blob), name="events/x.tfevents"))
    assert info.value.offset == second
    assert "events/x.tfevents" in str(info.value) and str(second) in str(info.value)


def test_corrupt_footer_detected_for_both_footer_kinds():
    for checksum in (False, True):
        blob = bytearray(encode_record(b"payload", checksum=checksum))
        blob[-1] ^= 0x01
        with pytest.raises(CorruptRecordError, match="checksum"):
            read_record(bytes(blob), 0, name="f")


def test_payload_corruption_detected_with_real_crc():
    blob = bytearray(encode_record(b"payload", checksum=True))
    blob[14] ^= 0x01
    with pytest.raises(CorruptRecordError):
        read_record(bytes(blob), 0)


def test_index_length_disagreement_is_an_error():
    rec = encode_record(b"abc")
    with pytest.raises(CorruptRecordError, match="index says"):
        read_record(rec, 0, expect_length=len(rec) + 1)


def test_read_past_end_is_an_error_naming_truncation():
    rec = encode_record(b"abcdef")
    with pytest.raises(CorruptRecordError, match="truncated"):
        read_record(rec[:-3], 0, name="f")
