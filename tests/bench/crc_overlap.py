"""Benchmark: can the CRC-32C of a large record hide behind its write? (the hook writer's checksums)

    python -m tests.bench.crc_overlap [--rounds 6] [--dirs /tmp,/dev/shm] [--write-md]

The trial writer computes the CRC-32C of every record it writes (sdk_ext.format.checksums); for a
large record that is one more pass over the tensor's bytes after the write copied them into the page
cache. Both the ``crc32c`` package (from 32 KiB) and the file write release the GIL, so the CRC could
run on a second thread during the write. This measures, per record, with the writer's file pattern
(a new file per step of 8 records, records rotating over 8 arrays): the write alone, write then CRC
(what the writer does), and the CRC handed to a waiting helper thread while the same bytes are written
(the hand-off through two ``queue.SimpleQueue``, the cheapest there is). Alternating rounds, best and
median of ``--rounds``. If "overlapped" is not below "write, then CRC" on the machine, the thread does
not pay there.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO

import numpy as np

from sdk_ext.format.checksums import crc32c
from tests.bench._markdown import where, write_section

SIZES = (1 << 20, 392 * 1024)  # the throughput benchmark's records; the MLP's largest weight and gradient
STEPS, PER_STEP = 40, 8


class _Helper:
    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
        self.results: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (job := self.jobs.get()) is not None:
            self.results.put(crc32c(job))

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join()


def run_round(base: str, size: int, helper: _Helper) -> dict[str, float]:
    arrays = [np.random.default_rng(i).standard_normal(size // 8).data.cast("B") for i in range(PER_STEP)]

    def write_only(f: IO[bytes], mv: memoryview) -> None:
        f.write(mv)

    def write_then_crc(f: IO[bytes], mv: memoryview) -> None:
        f.write(mv)
        crc32c(mv)

    def overlapped(f: IO[bytes], mv: memoryview) -> None:
        helper.jobs.put(mv)
        try:
            f.write(mv)
        finally:
            helper.results.get()

    ways: dict[str, Callable[[IO[bytes], memoryview], None]] = {
        "write alone": write_only, "write, then CRC": write_then_crc, "CRC on a helper thread during the write": overlapped}
    out = {}
    for name, way in ways.items():
        root = tempfile.mkdtemp(prefix="sdk-ext-crc-overlap-", dir=base)
        try:
            start = time.perf_counter()
            for step in range(STEPS):
                with open(os.path.join(root, f"{step:012d}.tfevents"), "wb") as f:
                    for mv in arrays:
                        way(f, mv)
            out[name] = (time.perf_counter() - start) / (STEPS * PER_STEP)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--dirs", default=tempfile.gettempdir() + ",/dev/shm")
    parser.add_argument("--write-md", action="store_true", help="update the crc_overlap section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    helper = _Helper()
    lines = ["| file system | record | way | us per record: best | median | vs write alone |", "|---|---|---|---|---|---|"]
    try:
        for base in [d for d in args.dirs.split(",") if d and os.path.isdir(d)]:
            place = where(base)
            for size in SIZES:
                times: dict[str, list[float]] = {}
                for _ in range(args.rounds):
                    for name, seconds in run_round(base, size, helper).items():
                        times.setdefault(name, []).append(seconds)
                alone = min(times["write alone"])
                for name, values in times.items():
                    extra = "" if name == "write alone" else f"{(min(values) - alone) * 1e6:+.0f} us"
                    lines.append(f"| {place} | {size // 1024} KiB | {name} | "
                                 f"{min(values) * 1e6:.0f} | {statistics.median(values) * 1e6:.0f} | {extra} |")
    finally:
        helper.stop()
    load = os.getloadavg()[0]
    body = ("## The hook writer's CRC of a large record: after the write, or on a helper thread during it\n\n"
            f"Command: `python -m tests.bench.crc_overlap --rounds {args.rounds} --write-md` ({os.cpu_count()} cores, "
            f"load average {load:.1f} at the end). {STEPS} files of {PER_STEP} records per way and round, ways "
            "alternating within each round.\n\n" + "\n".join(lines))
    print(body)
    if args.write_md:
        write_section("crc_overlap", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
