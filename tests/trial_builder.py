"""Write trials with the format code (no hook): for tests and benchmarks.

    b = TrialBuilder(LocalStorage(tmp_path))
    b.collections(["worker_0", "worker_1"])
    b.step(0, "worker_0", mode=ModeKeys.TRAIN, tensors={"loss": np.float32(0.5) * np.ones(())})
    b.end()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdk_ext.format.checksums import crc32c, extend_parts
from sdk_ext.format.collection_file import CollectionsFile, CollectionSpec, ReductionSpec, encode_collections
from sdk_ext.format.events import encode_tensor_record_parts
from sdk_ext.format.index import IndexFile, ShapeEntry, TensorEntry, encode_index
from sdk_ext.format.paths import END_OF_JOB, collections_key, event_key, index_key, reduction_tensor_name
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import Storage

DEFAULT_COLLECTIONS = {
    "default": CollectionSpec(name="default", include_regex=(".*",), reduction=ReductionSpec()),
    "weights": CollectionSpec(name="weights", include_regex=("weight",)),
}


@dataclass(frozen=True)
class WrittenStep:
    event_key: str
    event: bytes
    index_key: str
    index: bytes


class TrialBuilder:
    """``checksums=True``: index files carry sdk_ext's checksums, as TrialWriter writes them by default
    (False: exactly smdebug's bytes)."""

    def __init__(self, storage: Storage, *, wall_time: float = 1_700_000_000.25, checksums: bool = False) -> None:
        self.storage = storage
        self.wall_time = wall_time
        self.checksums = checksums

    def collections(
        self,
        workers: Sequence[str] = ("worker_0",),
        *,
        num_workers: int | None = None,
        specs: Mapping[str, CollectionSpec] | None = None,
    ) -> None:
        doc = encode_collections(CollectionsFile(dict(specs or DEFAULT_COLLECTIONS), num_workers or len(workers)))
        for worker in workers:
            self.storage.write(collections_key(worker), doc)

    def encode_step(
        self,
        step: int,
        worker: str = "worker_0",
        *,
        mode: ModeKeys = ModeKeys.GLOBAL,
        mode_step: int | None = None,
        tensors: Mapping[str, Any] = {},
        shapes: Mapping[str, Sequence[int]] = {},
        reductions: Mapping[tuple[str, str, bool], Any] = {},
    ) -> WrittenStep:
        """The bytes of one step's event file and index (reductions keyed by (tensor, op, abs))."""
        mode_step = step if mode_step is None else mode_step
        records = dict(tensors)
        for (name, op, is_abs), value in reductions.items():
            records[reduction_tensor_name(name, op, abs=is_abs)] = value
        parts: list[bytes | memoryview] = []
        entries = []
        crcs: list[int] = []
        offset = 0
        for name, value in records.items():
            array = value if isinstance(value, np.ndarray) else np.array([value])
            record, length = encode_tensor_record_parts(
                name, array, step=step, wall_time=self.wall_time, mode=mode, mode_step=mode_step
            )
            parts += record
            crcs.append(extend_parts(0, record))
            entries.append(TensorEntry(name, offset, length))
            offset += length
        ekey = event_key(step, worker)
        shape_entries = tuple(ShapeEntry(n, n, tuple(s)) for n, s in shapes.items())
        index = IndexFile(mode, mode_step, ekey if entries else None, tuple(entries), shape_entries)
        event = b"".join(bytes(p) for p in parts)
        checks = ((crc32c(event), crcs) if entries else (None, [])) if self.checksums else None
        return WrittenStep(ekey, event, index_key(step, worker), encode_index(index, checks=checks))

    def step(self, step: int, worker: str = "worker_0", *, write_event: bool = True, **kw: Any) -> WrittenStep:
        """Write one step: the event file first, then its index (as a hook commits them)."""
        written = self.encode_step(step, worker, **kw)
        if write_event and written.event:
            self.storage.write(written.event_key, written.event)
        self.storage.write(written.index_key, written.index)
        return written

    def end(self) -> None:
        self.storage.write(END_OF_JOB, b"")


class FakeClock:
    """A clock whose ``sleep`` advances time and runs scheduled callbacks (the writer making progress)."""

    def __init__(self) -> None:
        self.time = 1000.0
        self.sleeps: list[float] = []
        self._actions: list[Any] = []

    def now(self) -> float:
        return self.time

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.time += seconds
        if self._actions:
            self._actions.pop(0)()

    def on_sleep(self, *actions: Any) -> None:
        """Run these, one per sleep, in order."""
        self._actions.extend(actions)

    @property
    def slept(self) -> float:
        return sum(self.sleeps)
