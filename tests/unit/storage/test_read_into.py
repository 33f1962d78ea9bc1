"""read_into: the optional capability that fills a caller's buffer (one copy, writable memory)."""

from __future__ import annotations

import pytest

from sdk_ext.exceptions import StorageNotFound
from sdk_ext.storage import InMemoryStorage, LocalStorage


@pytest.fixture(params=["local", "memory"])
def storage(request, tmp_path):
    return LocalStorage(tmp_path) if request.param == "local" else InMemoryStorage()


def test_read_into_fills_the_buffer_from_an_offset_and_reports_short_tails(storage):
    storage.write("events/a.tfevents", bytes(range(100)))
    buf = bytearray(10)
    assert storage.read_into("events/a.tfevents", buf, start=20) == 10 and buf == bytes(range(20, 30))
    tail = bytearray(10)
    assert storage.read_into("events/a.tfevents", tail, start=95) == 5 and tail[:5] == bytes(range(95, 100))
    view = memoryview(bytearray(4))
    assert storage.read_into("events/a.tfevents", view) == 4 and bytes(view) == bytes(range(4))


def test_read_into_a_missing_key_raises_not_found(storage):
    with pytest.raises(StorageNotFound):
        storage.read_into("events/none.tfevents", bytearray(4))
