"""Where one worker's saved values go: the trial writer, the collections file, TensorBoard.

The hook decides *what* to save (:mod:`sdk_ext.hooks.policy`); this turns a plan and a value into
records: shape entry, then reductions (in config order), then the raw value, then TensorBoard
summaries. The collections file is written after the first step that wrote something, rewritten
when saved tensors joined collections later, and written at close if nothing was ever saved.

Remote storage (anything but a local directory or memory) is written through a bounded local
spool (:class:`~sdk_ext.storage.spool.UploadSpool`), so an S3 outage delays uploads instead of
losing steps or disabling the hook; its place, size, drain time and backoff come from
:class:`~sdk_ext.storage.spool.SpoolConfig` (``SDK_EXT_SPOOL_*`` environment variables by default).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sdk_ext.exceptions import StorageError, UnsupportedDtypeError
from sdk_ext.format.collection_file import CollectionsFile
from sdk_ext.format.paths import reduction_tensor_name
from sdk_ext.format.reductions import reduce
from sdk_ext.hooks.policy import TensorPlan
from sdk_ext.hooks.writer import TrialWriter
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import Storage, Writes
from sdk_ext.storage.base import Buffer
from sdk_ext.storage.spool import SpoolConfig, UploadSpool

logger = logging.getLogger(__name__)

Reductions = dict[tuple[str, bool], np.ndarray[Any, Any]]


class TrialOutput:
    """The files of one writing worker.

    Args:
        storage: the trial root.
        worker: ``worker_{rank}``.
        collections: builds the current collections file content.
        clock: wall time of records.
        tensorboard_dir: a local directory for TensorBoard files, or None for no export.
        spool: the upload spool's configuration for remote storage; default :meth:`SpoolConfig.from_env`.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        worker: str,
        collections: Callable[[], CollectionsFile],
        clock: Callable[[], float],
        tensorboard_dir: str | None = None,
        spool: SpoolConfig | None = None,
    ) -> None:
        # direct (local disk, memory): a step is complete before the next opens; spooled (remote): steps
        # wait in a local upload spool
        self.spool: UploadSpool | None = None
        if storage.capabilities().writes is Writes.DIRECT:
            self.writer = TrialWriter(storage, worker=worker, clock=clock, lag=0)
        else:
            self.spool = UploadSpool(storage, config=spool or SpoolConfig.from_env(), name=worker)
            self.writer = TrialWriter(storage, worker=worker, clock=clock, background=False, spool=self.spool)
        self._collections = collections
        self._collections_written = False
        self._collections_failed = False  # the last write of the collections file failed (warned once)
        self._vanished = False  # files of the trial vanished while training (warned once)
        self._tb: Any = None
        if tensorboard_dir is not None:
            from sdk_ext.hooks.tensorboard import TensorBoardWriter

            self._tb = TensorBoardWriter(tensorboard_dir, clock=clock)
        self._warned: set[tuple[str, str]] = set()
        self._step = -1
        self._mode = ModeKeys.GLOBAL

    @property
    def step_open(self) -> bool:
        return self.writer.step_open

    def open_step(self, step: int, mode: ModeKeys, mode_step: int) -> None:
        self._step, self._mode = step, mode
        self.writer.open_step(step, mode, mode_step)

    def close_step(self, *, collections_changed: bool) -> None:
        """Finish the step; (re)write the collections file if it is missing, stale, or vanished."""
        if not self.writer.step_open:
            return
        wrote = self.writer.close_step()
        lost = self.writer.vanished_steps
        if lost or (wrote and self._collections_written and self.writer.collections_missing()):
            self._trial_vanished(lost)
        if wrote and (collections_changed or not self._collections_written):
            self.write_collections()
        if self._tb is not None:
            self._tb.flush()

    def _trial_vanished(self, lost: list[int]) -> None:
        """Files of the trial vanished while training (its directory deleted): say once what was lost,
        and have the collections file written again, so that the steps saved from now on can be read."""
        if not self._vanished:
            what = (f"the files of step(s) {', '.join(map(str, lost))} vanished before they were complete"
                    if lost else "its collections file is gone")
            logger.warning(
                "sdk_ext: the trial %s lost files while training (was its directory deleted?): %s, and the steps "
                "saved before are probably lost with it. Its collections file is written again, so the steps saved "
                "from now on can be read.", self.writer.storage.uri, what,
            )
        self._vanished = True
        self.writer.vanished_steps = []
        self._collections_written = False

    def write_collections(self) -> None:
        """Write the collections file. A failure (a full disk) is logged, once, naming the file, never
        raised: the file is tried again at every saved step and at close, since a reader cannot open
        the trial without it."""
        try:
            self.writer.write_collections(self._collections())
        except (StorageError, OSError) as err:
            self._collections_written = False
            if not self._collections_failed:
                logger.warning(
                    "sdk_ext: could not write the collections file of %s (%s); a reader cannot open the trial "
                    "without it: it is tried again at every saved step and at close", self.writer.storage.uri, err,
                )
            self._collections_failed = True
            return
        if self._collections_failed:
            logger.warning("sdk_ext: the collections file of %s is written now", self.writer.storage.uri)
            self._collections_failed = False
        self._collections_written = True

    def warn_once(self, name: str, kind: str, msg: str, *args: object) -> None:
        if (name, kind) not in self._warned:
            self._warned.add((name, kind))
            logger.warning(msg, *args)

    def write(
        self,
        name: str,
        plan: TensorPlan,
        array: np.ndarray[Any, Any] | None,
        reductions: Reductions,
        *,
        shape: tuple[int, ...] | None = None,
        wall_time: float | None = None,
        content: Sequence[Buffer] | None = None,
    ) -> None:
        """Write what ``plan`` asks for. ``reductions`` holds ops computed already (by a framework);
        ``array`` may be None when everything needed is in ``reductions`` and ``shape``. ``content``:
        the raw tensor's bytes as several buffers (see :meth:`TrialWriter.write_tensor`), for a plan of
        the raw tensor only, without TensorBoard (``array`` then gives only its dtype and shape)."""
        if content is not None and (plan.ops or self._tb is not None):
            raise ValueError(f"tensor {name!r}: its bytes come in parts, so no reduction or TensorBoard "
                             "value can be computed from it")
        writer = self.writer
        if not writer.step_open:
            return
        try:
            name.encode("utf-8")  # every record holds its name as UTF-8 (a lone surrogate has none)
        except UnicodeEncodeError as err:
            self.warn_once(name, "name", "tensor %a not saved: its name cannot be written as UTF-8 (%s); the other "
                           "tensors are saved", name, err)
            return
        shape = tuple(array.shape) if array is not None else shape
        if shape is None or math.prod(shape) == 0:
            self.warn_once(name, "empty", "tensor %r is empty; empty tensors are not saved", name)
            return
        try:
            if plan.shape:
                writer.write_shape(name, shape)
            for op, is_abs in plan.ops:
                value = reductions.get((op, is_abs))
                if value is None and array is not None:
                    try:
                        value = reduce(array, op, abs=is_abs)
                    except (TypeError, ValueError) as err:
                        self.warn_once(name, op, "reduction %s of %r skipped: %s", op, name, err)
                        continue
                if value is not None:
                    writer.write_tensor(reduction_tensor_name(name, op, abs=is_abs), value, wall_time=wall_time)
            if plan.raw and array is not None:
                writer.write_tensor(name, array, wall_time=wall_time, content=content)
        except UnsupportedDtypeError as err:
            self.warn_once(name, "dtype", "tensor %r not saved: %s", name, err)
            return
        if self._tb is not None and array is not None:
            self._tb.add(name, array, plan, step=self._step, mode=self._mode)

    def abort_step(self) -> None:
        self.writer.abort_step()

    def flush(self) -> None:
        self.writer.flush()

    def close(self, *, end_marker: bool) -> None:
        """Close the open step, write the collections file if never written (even after a failure: the
        steps written before it stay readable), the consolidated index, the end marker if asked."""
        try:
            try:
                if self.writer.step_open:
                    self.close_step(collections_changed=False)
            finally:
                if not self._collections_written or self.writer.collections_missing():
                    self.write_collections()
                if not self._collections_written:  # a full disk: the optional consolidated index gives way
                    self.writer.drop_consolidated("the disk has no room for the collections file")
                    self.write_collections()
            self.writer.finish_index()  # after every step, before the marker
            if end_marker:
                self.writer.write_end_marker()
        finally:
            try:
                self.writer.close()
            finally:
                if self._tb is not None:
                    self._tb.close()


__all__ = ["Reductions", "TrialOutput"]
