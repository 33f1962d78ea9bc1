"""BENCHMARKS.md sections: each benchmark owns the text between its two marker comments."""

from __future__ import annotations

import subprocess
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"


def where(directory: str) -> str:
    """``directory`` and its file system type as the tables name it: ``/dev/shm (tmpfs)`` (``?`` if unknown)."""
    fs = subprocess.run(["df", "--output=fstype", directory], capture_output=True, text=True, check=False).stdout.split()
    return f"{directory} ({fs[-1] if fs else '?'})"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"


def write_section(name: str, body: str, path: Path = BENCHMARKS) -> None:
    """Replace benchmark ``name``'s section of ``path`` with ``body`` (appended if it has none yet)."""
    start, end = markers(name)
    body = body.strip("\n")
    if body.startswith(start):  # a body that already carries its markers
        body = body[len(start) :].strip("\n")
    if body.endswith(end):
        body = body[: -len(end)].strip("\n")
    block = f"{start}\n{body}\n{end}"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
