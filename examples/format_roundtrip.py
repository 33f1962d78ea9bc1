"""Smallest end-to-end check of the on-disk format: write a 3-step trial, read every record back.

Run: python examples/format_roundtrip.py [OUT_DIR]
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

from sdk_ext.format import (
    IndexFile,
    TensorEntry,
    encode_index,
    encode_tensor_record_parts,
    parse_index,
    read_record,
)
from sdk_ext.format.events import decode_tensor_event
from sdk_ext.format.paths import END_OF_JOB, event_key, index_key
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage


def write_trial(storage: LocalStorage, steps: int = 3) -> None:
    rng = np.random.default_rng(0)
    for step in range(steps):
        entries, parts, offset = [], [], 0
        for name, value in (("loss", np.float32(1.0 / (step + 1))), ("fc.weight", rng.normal(size=(4, 3)))):
            record, length = encode_tensor_record_parts(
                name, np.asarray(value), step=step, wall_time=time.time(), mode=ModeKeys.TRAIN, mode_step=step
            )
            parts += record
            entries.append(TensorEntry(name, offset, length))
            offset += length
        storage.write(event_key(step, "worker_0"), parts)
        index = IndexFile(ModeKeys.TRAIN, step, event_key(step, "worker_0"), tuple(entries))
        storage.write(index_key(step, "worker_0"), encode_index(index))
    storage.write(END_OF_JOB, b"")


def main(argv: list[str]) -> int:
    out = argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="sdk-ext-demo-")
    storage = LocalStorage(out)
    write_trial(storage)
    for key in storage.list("index/"):
        index = parse_index(storage.read(key), key=key)
        data = storage.read(index.event_file or "")
        for entry in index.tensors:
            event = decode_tensor_event(read_record(data, entry.start, name=index.event_file or "", expect_length=entry.length))
            print(f"{key}: step {event.step} {index.mode.name} {entry.name} shape={event.value.shape} "
                  f"mean={float(np.mean(event.value)):.4f}")
    print(f"trial written and read back at {storage.uri}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
