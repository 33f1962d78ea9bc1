"""Terminal output for the CLI: results on stdout; progress and live status on stderr, only on a terminal.

Not a terminal (a pipe, a file, CI): no progress, no live lines, no colour; just the results.
"""

from __future__ import annotations

import shutil
import sys
import threading
from typing import TextIO


class Console:
    """Args:
    out: results (stdout).
    err: progress and status (stderr).
    interactive: show progress (default: ``err`` is a terminal).
    quiet: results only, never progress or echoed output.
    """

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, *, interactive: bool | None = None,
                 quiet: bool = False) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        tty = interactive if interactive is not None else _isatty(self.err)
        self.interactive = tty and not quiet
        self.quiet = quiet
        self._lock = threading.Lock()  # guards _live (the status line currently shown)
        self._live = False

    def result(self, text: str) -> None:
        """A line of the command's result (always shown)."""
        with self._lock:
            self._clear()
            self.out.write(text + "\n")
            self.out.flush()

    def echo(self, text: str) -> None:
        """Passed-through output (e.g. the training script's lines): on a terminal only."""
        if not self.interactive:
            return
        with self._lock:
            self._clear()
            self.err.write(text + "\n")
            self.err.flush()

    def status(self, text: str) -> None:
        """Replace the live status line (terminal only)."""
        if not self.interactive:
            return
        width = shutil.get_terminal_size((100, 20)).columns - 1
        with self._lock:
            self.err.write("\r\x1b[2K" + text[:width])
            self.err.flush()
            self._live = True

    def progress(self, done: int, total: int, what: str) -> None:
        """A progress bar on the status line."""
        if total <= 0:
            return
        filled = round(20 * done / total)
        self.status(f"[{'#' * filled}{'.' * (20 - filled)}] {done}/{total} {what}")

    def done(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        if self._live:
            self.err.write("\r\x1b[2K")
            self.err.flush()
            self._live = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
