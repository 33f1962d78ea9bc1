"""Every storage backend and wrapper declares exactly the capabilities it has, and each one it declares works.

The read path and the writer use a capability only through ``Storage.capabilities()`` (nothing is looked
up by attribute name), so a backend that has a method but does not declare it would silently lose the fast
path, and one that declares what it cannot do would fail at the first read. Both are checked here, for
every class in sdk_ext that implements ``capabilities()`` (a new backend must be added to BACKENDS).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sdk_ext.exceptions import ConfigError, StorageNotFound
from sdk_ext.rules.stop_signal import StopSignal, StopSignalStorage
from sdk_ext.storage import Capabilities, InMemoryStorage, LocalStorage, Storage, Writes
from sdk_ext.storage.cache import CachingStorage
from sdk_ext.storage.s3 import S3Storage

ROOT = Path(__file__).resolve().parents[3]
DATA = bytes(range(256)) * 40  # 10 KiB, every byte value
KEY = "events/000000000001/000000000001_worker_0.tfevents"

# capability -> the methods that serve it
METHODS = {
    "direct_reads": ("read_into", "size"),
    "memory_maps": ("map",),
    "listings": ("list_objects", "info"),
    "local_paths": ("path",),
}


def _local(tmp_path: Path, s3: object) -> Storage:
    return LocalStorage(tmp_path / "trial")


def _memory(tmp_path: Path, s3: object) -> Storage:
    return InMemoryStorage()


def _s3(tmp_path: Path, s3: object) -> Storage:
    return S3Storage.from_uri(s3.uri("trial"))  # type: ignore[attr-defined]


def _cache(tmp_path: Path, s3: object) -> Storage:
    return CachingStorage(_s3(tmp_path, s3), tmp_path / "cache")


def _signal_local(tmp_path: Path, s3: object) -> Storage:
    return StopSignalStorage(_local(tmp_path, s3), StopSignal("stop-signal", 60.0))


def _signal_s3(tmp_path: Path, s3: object) -> Storage:
    return StopSignalStorage(_s3(tmp_path, s3), StopSignal("stop-signal", 60.0))


# name -> (factory, writes, optional capabilities declared, wrapped: the inner's capabilities are forwarded)
BACKENDS: dict[str, tuple[Callable[[Path, object], Storage], Writes, set[str], bool]] = {
    "LocalStorage": (_local, Writes.DIRECT, {"direct_reads", "memory_maps", "local_paths"}, False),
    "InMemoryStorage": (_memory, Writes.DIRECT, {"direct_reads", "listings"}, False),
    "S3Storage": (_s3, Writes.SPOOLED, {"listings"}, False),
    "CachingStorage": (_cache, Writes.SPOOLED, {"listings"}, False),
    "StopSignalStorage(local)": (_signal_local, Writes.DIRECT, {"direct_reads", "memory_maps", "local_paths"}, True),
    "StopSignalStorage(s3)": (_signal_s3, Writes.SPOOLED, {"listings"}, True),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Storage]]:
    name = request.param
    s3 = request.getfixturevalue("s3") if "3" in name or name == "CachingStorage" else None
    yield name, BACKENDS[name][0](tmp_path, s3)


def test_each_backend_declares_what_it_has_and_not_more(backend: tuple[str, Storage]) -> None:
    name, storage = backend
    _, writes, declared, wrapped = BACKENDS[name]
    caps = storage.capabilities()
    assert isinstance(caps, Capabilities)
    assert caps.writes is writes
    assert caps.names() == declared
    owner = storage.inner if wrapped else storage  # type: ignore[attr-defined]
    for capability, methods in METHODS.items():
        has = all(callable(getattr(type(owner), m, None)) for m in methods)
        # a backend with the methods must declare the capability (else the fast path is silently lost)
        assert has == (capability in declared), (name, capability)
    if wrapped:
        assert caps == storage.inner.capabilities()  # type: ignore[attr-defined]
        assert not hasattr(type(storage), "__getattr__"), "a wrapper forwards by declaring, not by attribute"


def test_each_declared_capability_works(backend: tuple[str, Storage]) -> None:
    name, storage = backend
    storage.write(KEY, DATA)
    caps = storage.capabilities()
    if caps.direct_reads is not None:
        buf = bytearray(300)
        assert caps.direct_reads.read_into(KEY, buf, start=1000) == 300
        assert bytes(buf) == DATA[1000:1300]
        assert caps.direct_reads.read_into(KEY, bytearray(300), start=len(DATA) - 10) == 10
        assert caps.direct_reads.size(KEY) == len(DATA)
        with pytest.raises(StorageNotFound):
            caps.direct_reads.size("events/missing")
    if caps.memory_maps is not None:
        assert bytes(caps.memory_maps.map(KEY)[5:4000]) == DATA[5:4000]
    if caps.listings is not None:
        listed = list(caps.listings.list_objects("events/"))
        assert [(o.key, o.size) for o in listed] == [(KEY, len(DATA))]
        info = caps.listings.info(KEY)
        assert info is not None and info.size == len(DATA) and info.etag == listed[0].etag
        assert caps.listings.info("events/missing") is None
    if caps.local_paths is not None:
        assert Path(caps.local_paths.path(KEY)).read_bytes() == DATA
    assert storage.read(KEY, start=7, length=11) == DATA[7:18]


def test_a_cache_refuses_a_storage_whose_listings_cannot_validate_copies(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be cached.*ETag"):
        CachingStorage(LocalStorage(tmp_path), tmp_path / "cache")


def test_every_class_with_capabilities_is_checked_here() -> None:
    """A new backend or wrapper (any class in sdk_ext defining ``capabilities``) must join BACKENDS."""
    found: set[str] = set()
    for path in (ROOT / "sdk_ext").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(item, ast.FunctionDef) and item.name == "capabilities" for item in node.body
            ):
                found.add(node.name)
    found.discard("Storage")  # the protocol itself
    tested = {name.split("(")[0] for name in BACKENDS}
    assert found == tested, f"not covered by this test: {sorted(found - tested)}; gone: {sorted(tested - found)}"


def test_the_read_path_and_the_writer_never_probe_storage_attributes() -> None:
    """Capabilities are asked for, never found by getattr/hasattr/isinstance on a backend class."""
    offenders = []
    for top in ("sdk_ext/trials", "sdk_ext/hooks", "sdk_ext/rules", "sdk_ext/evaluator.py"):
        paths = [ROOT / top] if top.endswith(".py") else sorted((ROOT / top).rglob("*.py"))
        for path in paths:
            text = path.read_text(encoding="utf-8")
            for needle in ('getattr(storage', 'getattr(self.storage', 'hasattr(storage', 'isinstance(storage, (Local',
                           'isinstance(storage, Local', 'isinstance(storage, InMemory', 'getattr(base.storage'):
                if needle in text:
                    offenders.append(f"{os.path.relpath(path, ROOT)}: {needle}")
    assert not offenders
