"""The trial writer: one worker's files in a trial, each one complete or absent.

Per saved global step S of worker W (paths in :mod:`sdk_ext.format.paths`)::

    events/{S:012d}/{S:012d}_{W}.tfevents    records appended as tensors arrive (written as .tmp)
    index/{S//1000:09d}/{S:012d}_{W}.json    written after the event file is complete

plus ``collections/000000000/{W}_collections.json`` and, at the end, ``training_job_end.ts``.

Invariants: a file appears under its final name only when it is complete (Storage commit:
``.tmp`` + rename locally, one PUT on S3), and an index file only after its event file, so a
reader never meets an index pointing into a missing or half-written event file. Records are
written while the step runs (a tensor's bytes go straight from the array to the file, never
copied into a Python buffer first), so the caller may change the array as soon as
:meth:`TrialWriter.write_tensor` returns. Committing (close + rename, or the upload) and the index
write run on one background thread, in order; :meth:`TrialWriter.flush` waits for them and raises
the first error they met.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sdk_ext.exceptions import StorageError
from sdk_ext.format.collection_file import CollectionsFile, encode_collections
from sdk_ext.format.events import encode_tensor_record_parts
from sdk_ext.format.index import IndexFile, ShapeEntry, TensorEntry, encode_index
from sdk_ext.format.paths import DEFAULT_WORKER, END_OF_JOB, collections_key, event_key, index_key
from sdk_ext.modes import ModeKeys
from sdk_ext.storage.base import ObjectWriter, Storage

logger = logging.getLogger(__name__)

_Task = Callable[[], None]
_STOP = object()


class _Committer:
    """Runs write tasks in submission order on one daemon thread; keeps the first error."""

    def __init__(self, *, max_pending: int) -> None:
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_pending)
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # guards _thread start

    def _run(self) -> None:
        while True:
            task = self._queue.get()
            try:
                if task is _STOP:
                    return
                if self._error is None:
                    task()  # type: ignore[operator]
            except BaseException as err:  # noqa: BLE001 - reported by raise_error() in the caller's thread
                self._error = err
            finally:
                self._queue.task_done()

    def submit(self, task: _Task) -> None:
        self.raise_error()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="sdk_ext-trial-writer", daemon=True)
                self._thread.start()
        self._queue.put(task)

    def join(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._queue.join()
        self.raise_error()

    def stop(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()
        self._thread = None

    def raise_error(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            if isinstance(err, StorageError):
                raise err
            raise StorageError(f"writing the trial failed: {err}") from err


class _OpenStep:
    """The step being written."""

    __slots__ = ("event_file", "mode", "mode_step", "offset", "shapes", "step", "tensors", "writer")

    def __init__(self, step: int, mode: ModeKeys, mode_step: int) -> None:
        self.step, self.mode, self.mode_step = step, mode, mode_step
        self.writer: ObjectWriter | None = None
        self.offset = 0
        self.tensors: list[TensorEntry] = []
        self.shapes: list[ShapeEntry] = []
        self.event_file = ""


class TrialWriter:
    """Writes the files of one worker into a trial root.

    Args:
        storage: the trial root.
        worker: the worker name (``worker_{rank}``).
        clock: wall time of each record (``time.time``); tests pass a fixed one.
        background: commit files on a background thread (True) or inline.
        max_pending: how many commits may wait before :meth:`close_step` blocks.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        worker: str = DEFAULT_WORKER,
        clock: Callable[[], float] = time.time,
        background: bool = True,
        max_pending: int = 4,
    ) -> None:
        self.storage = storage
        self.worker = worker
        self.clock = clock
        self._committer = _Committer(max_pending=max_pending) if background else None
        self._step: _OpenStep | None = None
        self.bytes_written = 0

    @property
    def step_open(self) -> bool:
        return self._step is not None

    def _run(self, task: _Task) -> None:
        if self._committer is None:
            task()
        else:
            self._committer.submit(task)

    def open_step(self, step: int, mode: ModeKeys, mode_step: int) -> None:
        """Start writing global step ``step``; a step still open is closed first."""
        if self._step is not None:
            self.close_step()
        if self._committer is not None:
            self._committer.raise_error()
        self._step = _OpenStep(step, mode, mode_step)

    def _require_step(self) -> _OpenStep:
        if self._step is None:
            raise RuntimeError("TrialWriter: no step is open; call open_step() first")
        return self._step

    def write_tensor(self, name: str, array: np.ndarray[Any, Any], *, wall_time: float | None = None) -> None:
        """Append one record (``array`` as is: dtype, shape) to the current step's event file."""
        st = self._require_step()
        parts, length = encode_tensor_record_parts(
            name,
            array,
            step=st.step,
            wall_time=self.clock() if wall_time is None else wall_time,
            mode=st.mode,
            mode_step=st.mode_step,
        )
        if st.writer is None:
            st.event_file = event_key(st.step, self.worker)
            st.writer = self.storage.open_write(st.event_file)
        writer = st.writer
        if length < 4096:
            writer.write(b"".join(parts))
        else:
            for part in parts:
                writer.write(part)
        st.tensors.append(TensorEntry(name, st.offset, length))
        st.offset += length
        self.bytes_written += length

    def write_shape(self, name: str, shape: tuple[int, ...], original_name: str | None = None) -> None:
        """Record a shape entry for ``name`` in the current step's index."""
        st = self._require_step()
        st.shapes.append(ShapeEntry(name, original_name or name, tuple(int(d) for d in shape)))

    def close_step(self) -> bool:
        """Finish the current step: commit its event file, then write its index. False if nothing was written."""
        st, self._step = self._step, None
        if st is None or (not st.tensors and not st.shapes):
            if st is not None and st.writer is not None:
                st.writer.abort()
            return False
        index = IndexFile(st.mode, st.mode_step, st.event_file or None, tuple(st.tensors), tuple(st.shapes))
        data = encode_index(index)
        key = index_key(st.step, self.worker)
        writer = st.writer

        def commit() -> None:
            if writer is not None:
                writer.commit()
            self.storage.write(key, data)

        self._run(commit)
        return True

    def abort_step(self) -> None:
        """Drop the current step without writing anything (its temporary file is removed)."""
        st, self._step = self._step, None
        if st is not None and st.writer is not None:
            try:
                st.writer.abort()
            except OSError:
                logger.debug("could not remove the temporary event file of step %d", st.step, exc_info=True)

    def write_collections(self, collections: CollectionsFile) -> None:
        """(Re)write this worker's collections file, atomically."""
        data = encode_collections(collections)
        key = collections_key(self.worker)
        self._run(lambda: self.storage.write(key, data))

    def write_end_marker(self) -> None:
        """Write the empty ``training_job_end.ts`` after everything queued so far."""
        self._run(lambda: self.storage.write(END_OF_JOB, b""))

    def flush(self) -> None:
        """Wait until everything submitted is written; raise the first error met."""
        if self._committer is not None:
            self._committer.join()

    def close(self) -> None:
        """Close the open step, write everything out and stop the background thread."""
        try:
            if self._step is not None:
                self.close_step()
            self.flush()
        finally:
            if self._committer is not None:
                self._committer.stop()


__all__ = ["TrialWriter"]
