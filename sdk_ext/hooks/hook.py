"""The framework-free hook: steps, modes, and saving named values into a trial.

    hook = Hook("/tmp/run1", save_config=SaveConfig(save_interval=10))
    hook.set_mode(ModeKeys.TRAIN)
    for batch in data:
        with hook.step():
            hook.save_tensor("layer/weight", w, collections_to_write="weights")
            hook.save_scalar("lr", lr)
    hook.close()

Steps: every :meth:`Hook.begin_step` advances the global step and the step of the current mode
(both start at 0). A value saved outside an open step opens the next one. What a step saves is
decided by :class:`~sdk_ext.hooks.policy.SavePolicy`; values given at a step that saves nothing are
dropped (smdebug carried them into the next saved step under that step's number).

Failure policy: configuration errors raise from the constructor. After that, no method raises:
the first failure is logged once with its traceback, the hook disables itself and training goes
on (the boundary is :func:`guarded`). A value whose dtype the format cannot hold is skipped with
one warning per tensor name; that is not a failure of the hook.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np

from sdk_ext.exceptions import ConfigError, UnsupportedDtypeError
from sdk_ext.format.events import to_numpy
from sdk_ext.format.paths import END_OF_JOB, reduction_tensor_name
from sdk_ext.hooks.collections import (
    BUILTIN_REGEXES,
    Collection,
    CollectionKeys,
    CollectionManager,
    compile_regex,
)
from sdk_ext.hooks.policy import SavePolicy, TensorPlan
from sdk_ext.hooks.reduction_config import RAW_ONLY, ReductionConfig
from sdk_ext.hooks.reductions import reduce_numpy
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode
from sdk_ext.hooks.writer import TrialWriter
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage, Storage, open_storage

logger = logging.getLogger(__name__)

SCALAR_PREFIX = "scalar/"
_SCALAR_PLAN = TensorPlan(True, False, (), False, True, ())
F = TypeVar("F", bound=Callable[..., Any])


def guarded(method: F) -> F:
    """The one fail-open boundary: a failure disables the hook instead of reaching the training loop."""

    @functools.wraps(method)
    def wrapper(self: Hook, *args: Any, **kwargs: Any) -> Any:
        if self._disabled:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception:  # noqa: BLE001 - everything; training must go on
            self._fail(method.__name__)
            return None

    return wrapper  # type: ignore[return-value]


def _close_at_exit(ref: weakref.ReferenceType[Hook]) -> None:
    hook = ref()
    if hook is not None:
        hook.close()


class Hook:
    """Saves tensors of a training job in the Debugger trial format (framework-free).

    Args:
        out_dir: the trial root (local directory, ``s3://bucket/prefix``, or a Storage).
        export_tensorboard: also write TensorBoard summaries (scalars, histograms).
        tensorboard_dir: where; default ``{out_dir}/tensorboard``.
        dry_run: decide everything, write nothing.
        reduction_config: for collections without their own; default: raw values only.
        save_config: for collections without their own; default: every 500 steps.
        include_regex: regexes added to the ``default`` collection, which is then saved.
        include_collections: collection names to save (the framework's defaults are always added).
        save_all: save every tensor the hook sees.
        include_workers: ``"one"`` (only rank 0 writes) or ``"all"``.
        collections: custom (or redefined built-in) collections.
        rank, world_size: this process's place in a distributed job; default: the framework's
            view (0 and 1 when there is no framework).
        clock: wall time of records (``time.time``); tests pass a fixed one.

    Raises:
        ConfigError: every problem of the configuration, in one message.
    """

    #: Built-in collections and their regexes for this framework.
    builtin_collections: dict[str, tuple[str, ...]] = BUILTIN_REGEXES
    #: Always saved (smdebug's default_include_collections).
    default_include_collections: tuple[str, ...] = (CollectionKeys.LOSSES,)

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | Storage,
        *,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | SaveConfigMode | dict[Any, Any] | int | None = None,
        include_regex: Iterable[str] | str | None = None,
        include_collections: Iterable[str] | str | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        collections: Iterable[Collection] | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        problems: list[str] = []
        if include_workers not in ("one", "all"):
            problems.append(f"include_workers must be 'one' or 'all', got {include_workers!r}")
        if reduction_config is not None and not isinstance(reduction_config, ReductionConfig):
            problems.append(f"reduction_config must be a ReductionConfig, got {reduction_config!r}")
            reduction_config = None
        try:
            parsed_save = SaveConfig.parse(save_config)
        except ConfigError as err:
            problems += err.problems
            parsed_save = SaveConfig()
        regexes = [include_regex] if isinstance(include_regex, str) else list(include_regex or ())
        for pattern in regexes:
            try:
                compile_regex(pattern, "include_regex")
            except ConfigError as err:
                problems += err.problems
        names = [include_collections] if isinstance(include_collections, str) else list(include_collections or ())
        problems += [f"include_collections items must be strings, got {n!r}" for n in names if not isinstance(n, str)]
        if rank is not None and (world_size is None or not 0 <= rank < world_size):
            problems.append(f"rank {rank!r} must be given with world_size and lie in [0, world_size)")
        self.storage: Storage = out_dir if isinstance(out_dir, Storage) else open_storage(out_dir)
        if isinstance(self.storage, LocalStorage) and not dry_run and self.storage.exists(END_OF_JOB):
            problems.append(
                f"out_dir {self.storage.uri} already holds a finished trial ({END_OF_JOB} exists); "
                "use a new out_dir or delete the old trial"
            )
        if problems:
            raise ConfigError(problems, where="hook configuration")

        self.out_dir = self.storage.uri
        self.dry_run = dry_run
        self.export_tensorboard = bool(export_tensorboard or tensorboard_dir)
        self.tensorboard_dir = tensorboard_dir
        self.include_workers = include_workers
        self.save_all = save_all
        self.save_config = parsed_save.complete()
        self.reduction_config = reduction_config or RAW_ONLY
        self.collection_manager = CollectionManager.with_builtins(self.builtin_collections)
        for coll in collections or ():
            self.collection_manager.add(coll)
        include = list(dict.fromkeys([*self.default_include_collections, *(str(n) for n in names)]))
        if regexes:
            self.collection_manager.get(CollectionKeys.DEFAULT).include(regexes)
            include.append(CollectionKeys.DEFAULT)
        if save_all:
            self.collection_manager.get(CollectionKeys.ALL).include(".*")
            include.append(CollectionKeys.ALL)
        self.policy = SavePolicy(
            self.collection_manager,
            include_collections=include,
            save_config=self.save_config,
            reduction_config=self.reduction_config,
            builtin=self.builtin_collections,
        )
        self.policy.prepare()  # unknown or empty collections fail here, before training
        self._rank, self._world_size = rank, world_size
        self._clock = clock
        self._writer: TrialWriter | None = None
        self._tb: Any = None
        self._worker_ready = False
        self._writes = False
        self._num_workers = 1
        self.worker = "worker_0"
        self._disabled = False
        #: The exception that disabled the hook, if one did.
        self.failure: BaseException | None = None
        self._closed = False
        self._atexit_registered = False
        self._collections_written = False
        self._global_step = -1
        self._mode = ModeKeys.GLOBAL
        self._mode_steps: dict[ModeKeys, int] = {}
        self._in_step = False
        self._step_mode = ModeKeys.GLOBAL
        self._step_mode_step = -1
        self._warned: set[tuple[str, str]] = set()

    # --- public API ------------------------------------------------------------------------------

    @property
    def global_step(self) -> int:
        """The current (or last) global step; -1 before the first."""
        return self._global_step

    @property
    def mode(self) -> ModeKeys:
        return self._mode

    @property
    def mode_step(self) -> int:
        """The step within the mode of the current step."""
        return self._step_mode_step

    @property
    def disabled(self) -> bool:
        """True once the hook has failed (or was closed): it saves nothing more."""
        return self._disabled

    @property
    def include_collections(self) -> list[str]:
        return self.policy.include_collections

    def get_collection(self, name: str, create: bool = True) -> Collection:
        return self.collection_manager.get(name, create=create)

    def get_collections(self) -> dict[str, Collection]:
        return self.collection_manager.get_collections()

    @guarded
    def set_mode(self, mode: ModeKeys | str | int) -> None:
        """Set the mode of the steps that follow (an open step keeps its own)."""
        self._mode = ModeKeys.parse(mode)

    @guarded
    def begin_step(self, global_step: int | None = None) -> None:
        """Start the next step (closing an open one). ``global_step`` jumps ahead, e.g. after a restart."""
        self._begin_step(global_step)

    @guarded
    def end_step(self) -> None:
        """Finish the open step: its files are complete once this returns (or soon after, see flush)."""
        self._end_step()

    @contextlib.contextmanager
    def step(self, global_step: int | None = None) -> Iterator[int]:
        """``with hook.step(): ...`` = begin_step() ... end_step(); yields the global step."""
        self.begin_step(global_step)
        try:
            yield self._global_step
        finally:
            self.end_step()

    @guarded
    def save_tensor(self, tensor_name: str, tensor_value: Any, collections_to_write: str | Iterable[str] = CollectionKeys.DEFAULT) -> None:
        """Save a value under ``tensor_name`` at the current step, as member of ``collections_to_write``.

        The named collections are created if needed and count as included; the value is written
        if one of them (or an included collection matching the name) is active at this step.
        """
        explicit = (collections_to_write,) if isinstance(collections_to_write, str) else tuple(collections_to_write)
        changed = False
        for name in explicit:
            coll = self.collection_manager.get(name)  # created if new
            if not coll.has_tensor_name(tensor_name):
                coll.add_tensor_name(tensor_name)
                changed = True
        self._ensure_step()
        if changed:
            self.policy.names_changed = True
            self._refresh_step()
        plan = self.policy.plan(tensor_name, explicit)
        if plan is not None:
            self._save(tensor_name, plan, tensor_value)

    @guarded
    def save_scalar(self, name: str, value: Any, sm_metric: bool = False, timestamp: float | None = None) -> None:
        """Save a scalar as ``scalar/{name}`` (shape (1,)) if the current step saves anything.

        ``sm_metric`` (SageMaker metrics) is accepted and ignored; ``timestamp`` becomes the record's wall time.
        """
        tensor_name = SCALAR_PREFIX + name
        self._ensure_step()
        plan = self.policy.plan(tensor_name)
        if plan is None and self.policy.step_saved:
            plan = _SCALAR_PLAN
        if plan is None:
            return
        array = self._to_numpy(value)
        if array.size != 1:
            self._warn_once(tensor_name, "not-scalar", "save_scalar(%r): value has %d elements, not 1; skipped", name, array.size)
            return
        self._write_plan(tensor_name, plan, array, {}, wall_time=timestamp)

    @guarded
    def flush(self) -> None:
        """Wait until every file of the completed steps is written."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """End training: finish the open step, write the collections file and the end marker.

        The end marker (``training_job_end.ts``) is not written inside SageMaker (``TRAINING_JOB_NAME``
        set), where the platform marks the end itself. Safe to call twice; never raises.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._disabled:
                if self._writer is not None:
                    self._writer.abort_step()
            elif self._in_step:
                self._end_step()
            if self._writer is not None:
                if not self._collections_written:
                    self._write_collections()
                if "TRAINING_JOB_NAME" not in os.environ:
                    self._writer.write_end_marker()
                self._writer.close()
            if self._tb is not None:
                self._tb.close()
        except Exception:  # noqa: BLE001 - close runs at exit too; never raise into the training script
            self._fail("close")
        finally:
            self._disabled = True

    # --- steps -----------------------------------------------------------------------------------

    def _ensure_step(self) -> None:
        if not self._in_step:
            self._begin_step(None)

    def _begin_step(self, global_step: int | None) -> None:
        if self._in_step:
            self._end_step()
        if not self._worker_ready:
            self._setup_worker()
        if global_step is None:
            self._global_step += 1
        elif global_step <= self._global_step:
            raise ValueError(f"begin_step({global_step}): steps must increase (last was {self._global_step})")
        else:
            self._global_step = global_step
        mode = self._mode
        self._step_mode = mode
        if mode is ModeKeys.GLOBAL:
            self._step_mode_step = self._global_step  # no mode set: the mode step is the global step
        else:
            self._step_mode_step = self._mode_steps.get(mode, -1) + 1
            self._mode_steps[mode] = self._step_mode_step
        self._in_step = True
        self.policy.begin_step(mode, self._step_mode_step)
        if self._writer is not None and self.policy.active:
            self._writer.open_step(self._global_step, mode, self._step_mode_step)

    def _refresh_step(self) -> None:
        """Collections changed inside a step: decide the step again (its files may start now)."""
        self.policy.begin_step(self._step_mode, self._step_mode_step)
        if self._writer is not None and self.policy.active and not self._writer.step_open:
            self._writer.open_step(self._global_step, self._step_mode, self._step_mode_step)

    def _end_step(self) -> None:
        self._in_step = False
        if self._writer is None or not self._writer.step_open:
            return
        wrote = self._writer.close_step()
        if wrote and (not self._collections_written or self.policy.names_changed):
            self._write_collections()
        if self._tb is not None:
            self._tb.flush()

    def _setup_worker(self) -> None:
        """Resolve rank and world size (first step), create the writer if this worker writes."""
        if self._rank is not None and self._world_size is not None:
            rank, size = self._rank, self._world_size
        else:
            rank, size = self._distributed_info()
        self.worker = f"worker_{rank}"
        self._writes = self.include_workers == "all" or rank == 0
        self._num_workers = size if self.include_workers == "all" else 1
        self._worker_ready = True
        if self._writes and not self.dry_run:
            self._writer = TrialWriter(self.storage, worker=self.worker, clock=self._clock)
            if self.export_tensorboard:
                from sdk_ext.hooks.tensorboard import TensorBoardWriter

                tb_dir = self.tensorboard_dir or os.path.join(self.out_dir, "tensorboard")
                self._tb = TensorBoardWriter(tb_dir, clock=self._clock)
        if not self._atexit_registered:
            atexit.register(_close_at_exit, weakref.ref(self))
            self._atexit_registered = True

    def _distributed_info(self) -> tuple[int, int]:
        """(rank, world size) as the framework sees it; frameworks override."""
        return 0, 1

    def _write_collections(self) -> None:
        assert self._writer is not None
        self.policy.names_changed = False
        self._writer.write_collections(
            self.collection_manager.to_file(
                num_workers=self._num_workers, default_save=self.save_config, default_reduction=self.reduction_config
            )
        )
        self._collections_written = True

    # --- values ----------------------------------------------------------------------------------

    def _to_numpy(self, value: Any) -> np.ndarray[Any, Any]:
        return to_numpy(value)

    def _save(self, name: str, plan: TensorPlan, value: Any) -> None:
        self._write_plan(name, plan, self._to_numpy(value), {})

    def _write_plan(
        self,
        name: str,
        plan: TensorPlan,
        array: np.ndarray[Any, Any],
        reductions: dict[tuple[str, bool], np.ndarray[Any, Any]],
        *,
        wall_time: float | None = None,
    ) -> None:
        """Write what ``plan`` asks for; ``reductions`` holds ops a framework computed already."""
        writer = self._writer
        if writer is None or not writer.step_open:
            return
        if array.size == 0:
            self._warn_once(name, "empty", "tensor %r is empty; empty tensors are not saved", name)
            return
        try:
            if plan.shape:
                writer.write_shape(name, array.shape)
            for op, is_abs in plan.ops:
                value = reductions.get((op, is_abs))
                if value is None:
                    try:
                        value = reduce_numpy(array, op, abs=is_abs)
                    except (TypeError, ValueError) as err:
                        self._warn_once(name, op, "reduction %s of %r skipped: %s", op, name, err)
                        continue
                writer.write_tensor(reduction_tensor_name(name, op, abs=is_abs), value, wall_time=wall_time)
            if plan.raw:
                writer.write_tensor(name, array, wall_time=wall_time)
        except UnsupportedDtypeError as err:
            self._warn_once(name, "dtype", "tensor %r not saved: %s", name, err)
            return
        if self._tb is not None:
            self._tb.add(name, array, plan, step=self._global_step, mode=self._step_mode)

    # --- failure ---------------------------------------------------------------------------------

    def _warn_once(self, name: str, kind: str, msg: str, *args: object) -> None:
        if (name, kind) not in self._warned:
            self._warned.add((name, kind))
            logger.warning(msg, *args)

    def _fail(self, where: str) -> None:
        if self.failure is None:
            self.failure = sys.exc_info()[1]
        if not self._disabled:
            logger.exception(
                "sdk_ext hook failed in %s; the hook is disabled for the rest of training (training goes on). "
                "Steps completed before this point are intact in %s.",
                where,
                self.out_dir,
            )
        self._disabled = True
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.abort_step()


__all__ = ["SCALAR_PREFIX", "Hook", "guarded"]
