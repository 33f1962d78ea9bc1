"""Every byte of every fixture file re-encodes identically from its decoded form."""

import pytest

from sdk_ext.format.collection_file import encode_collections, parse_collections
from sdk_ext.format.events import decode_tensor_event, encode_tensor_record_parts
from sdk_ext.format.index import encode_index, parse_index
from sdk_ext.format.records import scan_records
from tests.conftest import SMDEBUG_FIXTURES

FIXTURE_DIRS = sorted(p for p in SMDEBUG_FIXTURES.iterdir() if (p / "out").is_dir()) if SMDEBUG_FIXTURES.is_dir() else []


@pytest.mark.parametrize("fixture", FIXTURE_DIRS, ids=lambda p: p.name)
def test_event_files_reencode_byte_for_byte(fixture):
    files = sorted((fixture / "out" / "events").rglob("*.tfevents"))
    assert files
    for path in files:
        data = path.read_bytes()
        spans, end = scan_records(data, name=str(path))
        assert end == len(data)
        for span in spans:
            ev = decode_tensor_event(data[span.payload_offset : span.payload_offset + span.payload_length])
            parts, length = encode_tensor_record_parts(
                ev.tag, ev.value, step=ev.step, wall_time=ev.wall_time, mode=ev.mode, mode_step=ev.mode_step
            )
            assert length == span.length
            assert b"".join(bytes(p) for p in parts) == data[span.offset : span.offset + span.length]


@pytest.mark.parametrize("fixture", FIXTURE_DIRS, ids=lambda p: p.name)
def test_index_and_collection_files_reencode_byte_for_byte(fixture):
    for path in sorted((fixture / "out" / "index").rglob("*.json")):
        assert encode_index(parse_index(path.read_bytes(), key=str(path))) == path.read_bytes()
    for path in sorted((fixture / "out" / "collections").rglob("*.json")):
        assert encode_collections(parse_collections(path.read_bytes(), key=str(path))) == path.read_bytes()
