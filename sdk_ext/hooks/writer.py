"""The trial writer: one worker's files in a trial, each one complete or absent.

Per saved global step S of worker W (paths in :mod:`sdk_ext.format.paths`)::

    events/{S:012d}/{S:012d}_{W}.tfevents    records appended as tensors arrive (written as .tmp)
    index/{S//1000:09d}/{S:012d}_{W}.json    written after the event file is complete

plus ``collections/000000000/{W}_collections.json`` and, at the end, ``consolidated/{W}_index.sdkidx``
(every index file this writer committed, in one object: :mod:`sdk_ext.format.consolidated`; readers
of a finished trial on S3 fetch it instead of one object per step) and ``training_job_end.ts``.

Invariants: a file appears under its final name only when it is complete (Storage commit:
``.tmp`` + rename locally, one PUT on S3), and an index file only after its event file, so a
reader never meets an index pointing into a missing or half-written event file: an index file
whose event file is missing or shorter than it says is damage, not a step still being written.
Each index file carries the CRC-32C of its event file, of each record and of itself
(:mod:`sdk_ext.format.checksums`; ``checksums=False`` writes exactly smdebug's bytes), so a reader
names every damaged value instead of returning it. Records are
written while the step runs (a tensor's bytes go straight from the array to the file, never
copied into a Python buffer first), so the caller may change the array as soon as
:meth:`TrialWriter.write_tensor` returns.

Durability and speed: with ``lag=0`` (the default; local disks) a step is committed (renamed,
index written) before :meth:`TrialWriter.close_step` returns, so killing the process loses only
the step in progress. Creating files is what costs on a real disk (about 0.5 ms per new file or
directory here, against 10 us for a rename), so a background thread creates them ahead of need:
the index file of the open step and, when steps are saved back to back, the event and index files
of the next step while this one runs; a wrong guess is removed. Their temporary names
are all a crash can leave. With ``lag > 0`` commits run on that thread and up to ``lag`` closed
steps may still be in flight; :meth:`TrialWriter.flush` waits for them and raises the first error met.

Remote storage (S3) goes through an :class:`~sdk_ext.storage.spool.UploadSpool`: a step's files are
written to local disk and committed to the spool as one group (event file, then index), which
uploads groups in order on its own thread and rides out outages (see :mod:`sdk_ext.storage.spool`);
a step the full spool refuses is dropped whole, so no index ever points at a missing event file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sdk_ext.exceptions import StorageError, StorageNotFound
from sdk_ext.format.checksums import combine, crc32c
from sdk_ext.format.collection_file import CollectionsFile, encode_collections
from sdk_ext.format.consolidated import ConsolidatedEncoder, consolidated_key
from sdk_ext.format.events import encode_tensor_record_pieces
from sdk_ext.format.index import IndexFile, ShapeEntry, TensorEntry, encode_index_parts
from sdk_ext.format.paths import DEFAULT_WORKER, END_OF_JOB, collections_key, event_key, index_key
from sdk_ext.modes import ModeKeys
from sdk_ext.storage.base import Buffer, ObjectWriter, Storage
from sdk_ext.storage.spool import UploadSpool

logger = logging.getLogger(__name__)
#: records shorter than this are joined into one buffer: one write, one CRC pass each for the record and the file
SMALL = 4096
#: records at least this long have the event file's CRC combined from theirs (checksums.combine: about
#: 0.4 us for a length met before, 50 us to build its table the first time) instead of a second pass
#: over their bytes (about 1.5 us per 128 KiB with crc32c_rs, 4.5 with crc32c)
COMBINE_FROM = 128 * 1024

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

    @property
    def pending(self) -> int:
        return self._queue.unfinished_tasks

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


class _Prepared:
    """An object writer whose temporary file a background task is creating (a best effort: if that
    fails, the file is created when it is needed, and that attempt reports the error)."""

    __slots__ = ("failed", "key", "path", "ready", "writer")

    def __init__(self, key: str, writer: ObjectWriter, path: str) -> None:
        self.key, self.writer = key, writer
        self.path = path  # the file's place on disk (LocalStorage.path(key))
        self.ready = threading.Event()
        self.failed = False

    def create(self) -> None:
        try:
            self.writer.write(b"")  # LocalStorage creates the directory and the .tmp file on first write
        except Exception:
            self.failed = True
            logger.debug("creating %s ahead of time failed", self.key, exc_info=True)
        finally:
            self.ready.set()

    def usable(self) -> bool:
        self.ready.wait()
        return not self.failed

    def discard(self) -> None:
        self.writer.abort()
        if self.key.startswith("events/"):  # the step's own directory, made for this file alone
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(self.path))


class _OpenStep:
    """The step being written."""

    __slots__ = ("crcs", "event_file", "file_crc", "index", "mode", "mode_step", "offset", "shapes", "step", "tensors",
                 "writer")

    def __init__(self, step: int, mode: ModeKeys, mode_step: int) -> None:
        self.step, self.mode, self.mode_step = step, mode, mode_step
        self.crcs: list[int] = []  # CRC-32C of each record, in order
        self.file_crc = 0  # CRC-32C of the event file so far
        self.writer: ObjectWriter | None = None
        self.index: _Prepared | None = None
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
        background: use a background thread (to create files ahead, or to commit when ``lag > 0``).
        lag: how many closed steps may still be in flight when the next step opens; 0 means a
            step is complete before the next one starts (see the module doc).
        spool: write through this upload spool to ``storage`` (remote storage; ``background`` is
            then not needed: committing to the spool is a local rename).
        consolidate: also write the consolidated index at close.
        checksums: give each index file the CRC-32C of its event file, records and itself (False:
            exactly smdebug's bytes).
    """

    def __init__(
        self,
        storage: Storage,
        *,
        worker: str = DEFAULT_WORKER,
        clock: Callable[[], float] = time.time,
        background: bool = True,
        lag: int = 0,
        spool: UploadSpool | None = None,
        consolidate: bool = True,
        checksums: bool = True,
    ) -> None:
        self.storage = storage
        self.checksums = checksums
        self.spool = spool
        self.worker = worker
        self._summary: tuple[ConsolidatedEncoder, ObjectWriter] | None = None
        self._summary_done = not consolidate  # consolidate=False: only what smdebug writes
        self.clock = clock
        self.lag = lag
        self._committer = _Committer(max_pending=lag + 4) if background else None
        # files are created ahead only in a trial root of local files, written directly
        self._local = storage.capabilities().local_paths if background and spool is None else None
        self._prepare = self._local is not None
        self.dropped_steps = 0  #: steps the full spool refused
        #: steps whose files vanished before they were committed (the trial directory was deleted)
        self.vanished_steps: list[int] = []
        self._next: tuple[_Prepared | None, _Prepared | None] | None = None  # (event, index) of the step expected next
        self._last_saved = -2
        self._collections_at: str | None = None  # the collections file written (local), to see it vanish
        self._step: _OpenStep | None = None
        self.bytes_written = 0

    @property
    def step_open(self) -> bool:
        return self._step is not None

    def _run(self, task: _Task, *, inline: bool) -> None:
        if inline or self._committer is None:
            task()
        else:
            self._committer.submit(task)

    def _prepared(self, *keys: str) -> list[_Prepared | None]:
        """Writers for ``keys`` whose files one background task creates (one hand-off per step: each
        wakes the thread, which then competes with the training thread for the GIL)."""
        found: list[_Prepared | None] = []
        for key in keys:
            try:
                found.append(self._prepared_writer(key, self.storage.open_write(key)))
            except (OSError, StorageError):
                found.append(None)  # created when needed instead, where the error is reported
        todo = [p for p in found if p is not None]
        if todo:
            assert self._committer is not None

            def create() -> None:
                for prepared in todo:
                    prepared.create()

            self._committer.submit(create)
        return found

    def _prepared_writer(self, key: str, writer: ObjectWriter) -> _Prepared:
        assert self._local is not None
        return _Prepared(key, writer, self._local.path(key))

    def _discard_writer(self, key: str, writer: ObjectWriter) -> None:
        """Drop a step's unused event file (and, in a local root, the directory made for it)."""
        if self._local is not None:
            self._discard(self._prepared_writer(key, writer))
        else:
            writer.abort()

    def _discard(self, prepared: _Prepared | None) -> None:
        if prepared is not None and self._committer is not None:
            self._committer.submit(prepared.discard)

    def open_step(self, step: int, mode: ModeKeys, mode_step: int) -> None:
        """Start writing global step ``step``; a step still open is closed first."""
        if self._step is not None:
            self.close_step()
        if self._committer is not None:
            if self.lag and self._committer.pending > self.lag:
                self._committer.join()
            self._committer.raise_error()
        st = self._step = _OpenStep(step, mode, mode_step)
        if self._prepare:
            guess, self._next = self._next, None
            event = index = None
            if guess is not None:
                event, index = guess
                if index is None or index.key != index_key(step, self.worker):
                    self._discard(event)
                    self._discard(index)
                    event = index = None
            keys = [] if index is not None else [index_key(step, self.worker)]
            if step == self._last_saved + 1:  # saved back to back: create the next step's files while this one runs
                keys += [event_key(step + 1, self.worker), index_key(step + 1, self.worker)]
            prepared = self._prepared(*keys)
            if index is None:
                index = prepared.pop(0)
            st.index = index
            if event is not None and event.usable():
                st.event_file, st.writer = event.key, event.writer
            if prepared:
                self._next = (prepared[0], prepared[1])

    def _require_step(self) -> _OpenStep:
        if self._step is None:
            raise RuntimeError("TrialWriter: no step is open; call open_step() first")
        return self._step

    def write_tensor(self, name: str, array: np.ndarray[Any, Any], *, wall_time: float | None = None,
                     content: Sequence[Buffer] | None = None) -> None:
        """Append one record (``array`` as is: dtype, shape) to the current step's event file.

        ``content``, when given, is the array's bytes in order as several buffers (a tensor whose
        pieces lie in different places: its bytes are written from there, not gathered first); then
        ``array`` only gives the dtype and shape.

        Cost with checksums: a record under ``SMALL`` bytes is joined into one buffer (one write, two
        CRC calls: the record's and the file's); a longer one is three writes (prefix, the array's bytes
        as a view, suffix), one CRC pass over it, and the file's CRC either a second pass (under
        ``COMBINE_FROM``) or combined from the record's. On a helper thread during the write, the CRC
        of a large record measured slower here, not faster (``python -m tests.bench.crc_overlap``).
        """
        st = self._require_step()
        prefix, view, suffix, length = encode_tensor_record_pieces(
            name,
            array,
            step=st.step,
            wall_time=self.clock() if wall_time is None else wall_time,
            mode=st.mode,
            mode_step=st.mode_step,
        )
        writer = st.writer
        if writer is None:
            st.event_file = event_key(st.step, self.worker)
            writer = st.writer = (self.spool or self.storage).open_write(st.event_file)
        parts: Sequence[Buffer] = (view,) if view else ()
        if content is not None:  # the bytes from where they lie; the array gave the record's header
            parts = content
            given, expected = sum(memoryview(p).nbytes for p in parts), memoryview(view).nbytes
            if given != expected:
                raise ValueError(f"tensor {name!r}: its parts hold {given} bytes, its dtype and shape {expected}")
        if length < SMALL:
            record = b"".join((prefix, *parts, suffix))
            writer.write(record)
            if self.checksums:
                st.crcs.append(crc32c(record))
                st.file_crc = crc32c(record, st.file_crc)
        else:
            writer.write(prefix)
            record_crc = crc32c(prefix) if self.checksums else 0
            for part in parts:
                writer.write(part)
                if self.checksums:  # one pass over the tensor's bytes; the prefix and suffix are small
                    record_crc = crc32c(part, record_crc)
            writer.write(suffix)
            if self.checksums:
                record_crc = crc32c(suffix, record_crc)
                st.crcs.append(record_crc)
                # a large record's bytes are read once: the file's CRC is combined from the record's
                if length >= COMBINE_FROM:
                    st.file_crc = combine(st.file_crc, record_crc, length)
                else:
                    file_crc = crc32c(prefix, st.file_crc)
                    for part in parts:
                        file_crc = crc32c(part, file_crc)
                    st.file_crc = crc32c(suffix, file_crc)
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
        if st is None:
            return False
        if not st.tensors and not st.shapes:
            if st.writer is not None:
                self._discard_writer(st.event_file, st.writer)
            self._discard(st.index)
            return False
        head, tail = encode_index_parts(
            IndexFile(st.mode, st.mode_step, st.event_file if st.tensors else None, tuple(st.tensors), tuple(st.shapes)),
            checks=((st.file_crc, st.crcs) if st.tensors else (None, [])) if self.checksums else None,
        )
        data = head + tail
        event_writer = st.writer if st.tensors else None
        if st.writer is not None and not st.tensors:
            self._discard_writer(st.event_file, st.writer)
        index = st.index
        if self.spool is not None:
            entry = self.spool.open_write(index_key(st.step, self.worker))
            entry.write(data)
            files = [event_writer, entry] if event_writer is not None else [entry]
            if self.spool.submit(files, label=f"step {st.step}"):  # type: ignore[arg-type]
                self._summarize(st.step, head, tail)
            else:
                self.dropped_steps += 1
            self._last_saved = st.step
            return True

        def commit() -> None:
            if event_writer is not None:
                try:
                    event_writer.commit()
                except StorageNotFound:  # its directory was deleted with the file in it: the step is lost
                    logger.debug("the event file of step %d vanished before its commit", st.step, exc_info=True)
                    self.vanished_steps.append(st.step)
                    return  # no index for an event file that is not there
                except OSError:  # a full disk: free what this step took, so the collections file may still fit
                    with contextlib.suppress(OSError):
                        event_writer.abort()
                        if index is not None and index.usable():
                            index.writer.abort()
                    raise
            key = index_key(st.step, self.worker)
            if index is not None and index.usable():
                try:
                    index.writer.write(data)
                    index.writer.commit()
                except StorageNotFound:  # made ahead in a directory deleted since: write it anew
                    self.storage.write(key, data)
            else:
                self.storage.write(key, data)
            self._summarize(st.step, head, tail)

        self._run(commit, inline=self.lag == 0)
        self._last_saved = st.step
        return True

    def _summarize(self, step: int, head: bytes, tail: bytes) -> None:
        """Append a committed index file to the consolidated index (best effort: a failure drops the
        consolidated index, never a step; readers then read the index files one by one)."""
        if self._summary_done:
            return
        try:
            if self._summary is None:
                encoder = ConsolidatedEncoder()
                out = (self.spool or self.storage).open_write(consolidated_key(self.worker))
                self._summary = (encoder, out)
                out.write(encoder.start())
            encoder, out = self._summary
            for piece in encoder.add(step, head, tail):
                out.write(piece)
        except Exception as err:  # noqa: BLE001 - the consolidated index is optional; the trial is not
            self._drop_summary(f"writing it failed: {err}")

    def _drop_summary(self, why: str) -> None:
        self._summary_done = True
        summary, self._summary = self._summary, None
        logger.info("sdk_ext: no consolidated index for %s (%s); readers read its index files one by one",
                    self.worker, why)
        if summary is not None:
            with contextlib.suppress(Exception):
                summary[1].abort()

    def drop_consolidated(self, why: str) -> None:
        """Give up the consolidated index (its file so far is removed; readers read the index files)."""
        if not self._summary_done:
            if self._committer is not None and self.spool is None:
                with contextlib.suppress(StorageError):
                    self._committer.join()
            self._drop_summary(why)

    def finish_index(self) -> None:
        """Commit the consolidated index of every step committed so far (after them; called at close,
        before the end marker). Later steps are not added: it is written once."""
        if self._summary_done:
            return
        if self._committer is not None and self.spool is None:
            self._committer.join()  # with lag > 0 the last steps are committed (and added) there
        summary, self._summary = self._summary, None
        self._summary_done = True
        if summary is None:
            return
        encoder, out = summary
        try:
            out.write(encoder.finish(self.worker))
            out.commit()
        except Exception as err:  # noqa: BLE001 - optional, as in _summarize
            self._summary = summary
            self._drop_summary(f"committing it failed: {err}")

    def abort_step(self) -> None:
        """Drop the current step without writing anything (its temporary files are removed)."""
        st, self._step = self._step, None
        if st is None:
            return
        try:
            if st.writer is not None:
                st.writer.abort()
            if st.index is not None:
                st.index.ready.wait()
                st.index.writer.abort()
            if self._next is not None:
                self._discard(self._next[0])
                self._discard(self._next[1])
                self._next = None
        except OSError:
            logger.debug("could not remove the temporary files of step %d", st.step, exc_info=True)

    def write_collections(self, collections: CollectionsFile) -> None:
        """(Re)write this worker's collections file, atomically, before returning (a reader cannot open
        the trial without it, so a failure, e.g. a full disk, is the caller's to see, not a background
        thread's). Through a spool: queued like a step.

        Raises:
            StorageError: it could not be written (a local disk).
        """
        data = encode_collections(collections)
        key = collections_key(self.worker)
        if self.spool is not None:
            self.spool.write(key, data)
            return
        self.storage.write(key, data)
        self._collections_at = key

    def collections_missing(self) -> bool:
        """Whether the collections file this writer wrote is gone (its trial directory was deleted or
        emptied while training); False through a spool (remote storage), where that is not checked."""
        key = self._collections_at
        return key is not None and self.spool is None and not self.storage.exists(key)

    def write_end_marker(self) -> None:
        """Write the empty ``training_job_end.ts`` after everything queued so far (the consolidated
        index of this writer's steps first)."""
        self.finish_index()
        if self.spool is not None:
            self.spool.write(END_OF_JOB, b"")
            return
        self._run(lambda: self.storage.write(END_OF_JOB, b""), inline=False)

    def flush(self) -> None:
        """Wait until everything submitted is written; raise the first error met. Through a spool:
        wait at most its ``drain_timeout`` (what is left keeps uploading) and raise only a
        permanent failure."""
        if self.spool is not None:
            if not self.spool.drain():
                logger.info("sdk_ext: flush: %d steps still waiting to upload to %s", self.spool.pending_steps,
                            self.spool.uri)
            self.spool.raise_error()
        if self._committer is not None:
            self._committer.join()

    def close(self) -> None:
        """Close the open step, write everything out and stop the background thread."""
        try:
            if self._step is not None:
                self.close_step()
            if self._next is not None:
                self._discard(self._next[0])
                self._discard(self._next[1])
                self._next = None
            self.finish_index()
            if self.spool is None:
                self.flush()
        finally:
            if self._committer is not None:
                self._committer.stop()
            if self.spool is not None:
                self.spool.close()  # waits drain_timeout at most; logs what is left and where


__all__ = ["TrialWriter"]
