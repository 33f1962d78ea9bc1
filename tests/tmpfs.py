"""A real small file system that fills up: a tmpfs mounted for one test (root on Linux; skipped elsewhere).

    with mounted_tmpfs(tmp_path / "disk", size="8m") as disk:
        ...                      # write until ENOSPC
        fill(disk)               # or fill it now, leaving nothing free
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def mounted_tmpfs(directory: Path, *, size: str = "8m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` on ``directory`` (created) for the block; skip the test where impossible."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux")
    directory.mkdir(parents=True, exist_ok=True)
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(directory)],
                                 capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        pytest.skip(f"cannot mount a tmpfs here: {err}")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, timeout=30, check=False)


def fill(directory: Path, name: str = "filler") -> Path:
    """Write ``directory/name`` until the file system is full; returns its path."""
    path = directory / name
    chunk = b"\0" * (1 << 16)
    with open(path, "ab", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise
                break
    for size in (4096, 512, 1):  # the last partial pages
        with contextlib.suppress(OSError), open(path, "ab", buffering=0) as f:
            while f.write(b"\0" * size):
                pass
    return path
