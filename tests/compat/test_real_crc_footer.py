"""Issue 13.4: can the events/ footer carry the payload's real CRC? Not while smdebug must read the trial.

Real smdebug 1.0.34 requires its constant footer in events/ files (``check="minimal"``): a record
whose footer is the true masked CRC32C makes its trial reader fail. So sdk_ext's writer keeps the
constant (SageMaker's rule containers run smdebug on the same files), and sdk_ext's reader verifies
the real CRC wherever a footer is not the constant (TensorBoard files, other writers).
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import CorruptRecordError
from sdk_ext.format.index import parse_index
from sdk_ext.format.records import FOOTER_SIZE, HEADER_SIZE, MAGIC_FOOTER, masked_crc32c
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import create_trial
from tests.trial_builder import TrialBuilder

READ = (
    "import json, sys\n"
    "from smdebug.trials import create_trial\n"
    "t = create_trial(sys.argv[1])\n"
    "out = {}\n"
    "for n in t.tensor_names():\n"
    "    try:\n"
    "        out[n] = t.tensor(n).value(0).tolist()\n"
    "    except BaseException as e:\n"
    "        out[n] = type(e).__name__\n"
    "print(json.dumps(out))\n"
)


def write(root: Path, *, real_crc: bool) -> None:
    storage = LocalStorage(root)
    b = TrialBuilder(storage)
    b.collections()
    written = b.step(0, tensors={"a": np.arange(4, dtype=np.float32), "b": np.ones(3)})
    b.end()
    if real_crc:  # put each payload's true masked CRC32C into its footer
        event = bytearray(written.event)
        for t in parse_index(written.index).tensors:
            payload = bytes(event[t.start + HEADER_SIZE : t.start + t.length - FOOTER_SIZE])
            struct.pack_into("<I", event, t.start + t.length - FOOTER_SIZE, masked_crc32c(payload))
        storage.write(written.event_key, bytes(event))


def smdebug_reads(smdebug_python: Path, root: Path) -> dict[str, object]:
    done = subprocess.run(
        [str(smdebug_python), "-c", READ, str(root)], capture_output=True, text=True, timeout=120, check=False,
        env={"SMDEBUG_TRAINING_END_DELAY_REFRESH": "0", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.smdebug
def test_smdebug_rejects_records_whose_footer_is_the_real_crc(tmp_path, smdebug_python):
    write(tmp_path / "constant", real_crc=False)
    write(tmp_path / "crc", real_crc=True)
    assert smdebug_reads(smdebug_python, tmp_path / "constant") == {"a": [0.0, 1.0, 2.0, 3.0], "b": [1.0, 1.0, 1.0]}
    # its reader checks the footer against the constant and then raises an error it never imported
    assert smdebug_reads(smdebug_python, tmp_path / "crc") == {"a": "NameError", "b": "NameError"}


def test_sdk_ext_reads_both_footers_and_verifies_the_real_crc(tmp_path):
    write(tmp_path / "constant", real_crc=False)
    write(tmp_path / "crc", real_crc=True)
    for kind in ("constant", "crc"):
        assert create_trial(tmp_path / kind, timeout=0).tensor("a").value(0).tolist() == [0.0, 1.0, 2.0, 3.0]
    storage = LocalStorage(tmp_path / "crc")
    key = "events/000000000000/000000000000_worker_0.tfevents"
    event = bytearray(storage.read(key))
    assert struct.unpack_from("<I", event, len(event) - 4)[0] != MAGIC_FOOTER
    flips = 0
    first = parse_index(storage.read("index/000000000/000000000000_worker_0.json")).tensors[0]
    for bit in range((first.length - HEADER_SIZE - FOOTER_SIZE) * 8):  # every bit of a's payload
        damaged = bytearray(event)
        damaged[first.start + HEADER_SIZE + bit // 8] ^= 1 << (bit % 8)
        storage.write(key, bytes(damaged))
        with pytest.raises(CorruptRecordError):
            create_trial(tmp_path / "crc", timeout=0).tensor("a").value(0)
        flips += 1
    assert flips > 100
