"""The framework-free hook: steps, modes, and saving named values into a trial.

    hook = Hook("/tmp/run1", save_config=SaveConfig(save_interval=10))
    hook.set_mode(ModeKeys.TRAIN)
    for batch in data:
        with hook.step():
            hook.save_tensor("layer/weight", w, collections_to_write="weights")
            hook.save_scalar("lr", lr)
    hook.close()

Steps and modes (:mod:`sdk_ext.hooks.step_lifecycle`): every step advances the global step and the
step of its mode; a value saved outside an open step opens the next one (a framework hook whose
steps start at each forward call holds it for its next step instead). What a step saves is decided
by :class:`~sdk_ext.hooks.policy.SavePolicy`, ``save_tensor`` values included. A ``save_scalar``
value is always written, at the step and mode it was given, even if that step saves nothing else
(smdebug filed it under the next saved step, and lost it after the last one).

Failure policy: configuration errors raise from the constructor. After that, no method raises:
the first failure is logged once with its traceback, the hook disables itself and training goes
on (the boundary is :func:`~sdk_ext.hooks.step_lifecycle.guarded`). A value whose dtype the format cannot
hold is skipped with one warning per tensor name; that is not a failure of the hook.
"""

from __future__ import annotations

import atexit
import difflib
import inspect
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from sdk_ext.format.collection_file import CollectionsFile
from sdk_ext.format.events import to_numpy
from sdk_ext.hooks import registry, termination, workers
from sdk_ext.hooks.claim import TrialClaim
from sdk_ext.hooks.collections import (
    BUILTIN_REGEXES,
    KNOWN_NAMES,
    Collection,
    CollectionKeys,
    CollectionManager,
)
from sdk_ext.hooks.hook_args import HookArgs
from sdk_ext.hooks.output import Reductions, TrialOutput
from sdk_ext.hooks.policy import SavePolicy, TensorPlan
from sdk_ext.hooks.reduction_config import RAW_ONLY, ReductionConfig
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode
from sdk_ext.hooks.step_counter import StepCounter
from sdk_ext.hooks.step_lifecycle import HookSteps, guarded
from sdk_ext.hooks.trace_events import TraceEvents
from sdk_ext.modes import ModeKeys
from sdk_ext.profiler.config import ProfilingConfig
from sdk_ext.profiler.timeline import StepTimeline
from sdk_ext.storage import LocalStorage, Storage
from sdk_ext.storage.base import Buffer

logger = logging.getLogger(__name__)

SCALAR_PREFIX = "scalar/"
_SCALAR_PLAN = TensorPlan(True, False, (), False, True, ())
HookT = TypeVar("HookT", bound="Hook")


@dataclass(frozen=True, slots=True)
class _HeldValue:
    """A value given before the step it belongs to was open."""

    name: str
    value: np.ndarray[Any, Any]
    collections: tuple[str, ...]
    timestamp: float | None
    scalar: bool


def _close_at_exit(ref: weakref.ReferenceType[Hook]) -> None:
    hook = ref()
    if hook is not None:
        hook.close()


class Hook(TraceEvents, HookSteps):
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
    #: The mode the step timeline records GLOBAL-mode steps as (None: not recorded).
    timeline_global_mode: ModeKeys | None = ModeKeys.GLOBAL

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
        args = HookArgs.check(
            out_dir, dry_run=dry_run, reduction_config=reduction_config, save_config=save_config,
            include_regex=include_regex, include_collections=include_collections, include_workers=include_workers,
            rank=rank, world_size=world_size,
        )
        self.storage = args.storage
        self.out_dir = self.storage.uri
        self.dry_run = dry_run
        self.export_tensorboard = bool(export_tensorboard or tensorboard_dir)
        if tensorboard_dir is None and export_tensorboard:
            tensorboard_dir = f"{self.out_dir.rstrip('/')}/tensorboard"
        #: Where TensorBoard files go (``{out_dir}/tensorboard`` by default), or None for no export.
        self.tensorboard_dir = tensorboard_dir
        self.include_workers = include_workers
        self.save_all = save_all
        self.save_config = args.save_config.complete()
        self.reduction_config = args.reduction_config or RAW_ONLY
        self.collection_manager = CollectionManager.with_builtins(self.builtin_collections)
        for coll in collections or ():
            self.collection_manager.add(coll)
        include = list(dict.fromkeys([*self.default_include_collections, *args.include_collections]))
        if args.include_regex:
            self.collection_manager.get(CollectionKeys.DEFAULT).include(args.include_regex)
            include.append(CollectionKeys.DEFAULT)
        if save_all:
            self.collection_manager.get(CollectionKeys.ALL).include(".*")
            include.append(CollectionKeys.ALL)
        self.policy = SavePolicy(
            self.collection_manager,
            include_collections=include,
            save_config=self.save_config,
            reduction_config=self.reduction_config,
            builtin=KNOWN_NAMES | set(self.builtin_collections),
        )
        self.policy.prepare()  # included names that are no collection yet become empty ones to fill
        self._checked_empty = False
        self._held: list[_HeldValue] = []
        self._rank, self._world_size = rank, world_size
        self._clock = clock
        self._out: TrialOutput | None = None
        self._worker_ready = False
        self._claim: TrialClaim | None = None
        self._num_workers = 1
        self.worker = "worker_0"
        self._disabled = False
        #: The exception that disabled the hook, if one did.
        self.failure: BaseException | None = None
        self._closed = False
        self._explicit_steps = False
        self._steps = StepCounter()
        self._in_step = False
        self._timeline: StepTimeline | None = None
        self._timeline_started = False
        self._trace_warned = False
        #: The debughookconfig.json this hook was created from (``create_from_json_file``), resolved.
        self.config_file: str | None = None
        registry.register(self)

    @classmethod
    def create_from_json_file(  # noqa: PYI019
        cls: type[HookT], json_file_path: str | os.PathLike[str] | None = None, *, path: str | os.PathLike[str] | None = None
    ) -> HookT:
        """The process's hook configured by SageMaker's ``debughookconfig.json`` (see :mod:`sdk_ext.hooks.json_config`).

        ``json_file_path`` (smdebug's name; ``path`` is the same) defaults to
        ``$SMDEBUG_CONFIG_FILE_PATH``, then ``/opt/ml/input/config/debughookconfig.json``. When this
        process already has a hook created from that file (by an earlier call, ``get_hook`` or the
        zero-change path), that hook is returned: one trial, one writer (:mod:`sdk_ext.hooks.registry`).

        Raises:
            ConfigError: the file is missing or invalid (every problem, each naming its key).
        """
        from sdk_ext.hooks import json_config

        file = json_config.config_path(json_file_path if json_file_path is not None else path)
        with registry.lock:
            existing = registry.current()
            if isinstance(existing, cls) and registry.same_config_file(existing, file):
                logger.info("sdk_ext hook: using this process's hook, created from %s already", file)
                return existing
            config = json_config.load_config_file(file)
            kwargs = json_config.hook_kwargs_from_config(config, builtin=cls.builtin_collections)
            logger.info("sdk_ext hook configured from %s: out_dir %s", file, kwargs["out_dir"])
            hook = cls(kwargs.pop("out_dir"), **kwargs)
            hook.config_file = os.path.realpath(file)
            return hook

    # --- public API ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @property
    def include_collections(self) -> list[str]:
        return self.policy.include_collections

    def get_collection(self, name: str, create: bool = True) -> Collection:
        return self.collection_manager.get(name, create=create)

    def get_collections(self) -> dict[str, Collection]:
        return self.collection_manager.get_collections()

    @guarded
    def save_tensor(self, tensor_name: str, tensor_value: Any, collections_to_write: str | Iterable[str] = CollectionKeys.DEFAULT) -> None:
        """Save a value under ``tensor_name`` at the current step, as member of ``collections_to_write``.

        The named collections are created if needed and count as included; the value is written
        if one of them (or an included collection matching the name) saves at this step, as the save
        configs say (the framework-free hook's way of saving tensors, so the intervals apply).
        """
        explicit = (collections_to_write,) if isinstance(collections_to_write, str) else tuple(collections_to_write)
        if self._holds_values():
            for name in explicit:  # a member now: the next step's check for empty collections sees it
                coll = self.collection_manager.get(name)
                if not coll.has_tensor_name(tensor_name):
                    coll.add_tensor_name(tensor_name)
                    self.policy.names_changed = True
            self._held.append(_HeldValue(tensor_name, self._copy(tensor_value), explicit, None, False))
            return
        self._save_explicit(tensor_name, tensor_value, explicit)

    def _save_explicit(self, tensor_name: str, tensor_value: Any, explicit: tuple[str, ...]) -> None:
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
        """Save a scalar as ``scalar/{name}`` (shape (1,)) at the current step, even if it saves nothing else.

        ``sm_metric`` (SageMaker metrics) is accepted and ignored; ``timestamp`` becomes the record's
        wall time (default: now).
        """
        if timestamp is None:
            timestamp = self._clock()
        if self._holds_values():
            self._held.append(_HeldValue(name, self._copy(value), (), timestamp, True))
            return
        self._save_scalar(name, value, timestamp)

    def _save_scalar(self, name: str, value: Any, timestamp: float) -> None:
        tensor_name = SCALAR_PREFIX + name
        self._ensure_step()
        plan = self.policy.plan(tensor_name) or _SCALAR_PLAN
        array = self._to_numpy(value)
        if array.size != 1:
            self._warn_once(tensor_name, "not-scalar", "save_scalar(%r): value has %d elements, not 1; skipped", name, array.size)
            return
        self._open_output()
        if self._out is not None:
            self._out.write(tensor_name, plan, array, {}, wall_time=timestamp)

    # --- values given outside a step --------------------------------------------------------------

    def _holds_values(self) -> bool:
        """Whether a value given now is held for the next step (no step is open and the framework
        starts steps itself); the framework-free hook opens the next step instead."""
        return False

    def _copy(self, value: Any) -> np.ndarray[Any, Any]:
        """The value as an array of its own (the caller may change theirs before the next step)."""
        return np.array(self._to_numpy(value), copy=True)

    def _write_held(self) -> None:
        """Write the values held for this step (called once the step is open)."""
        held, self._held = self._held, []
        for v in held:
            if v.scalar:
                self._save_scalar(v.name, v.value, v.timestamp if v.timestamp is not None else self._clock())
            else:
                self._save_explicit(v.name, v.value, v.collections)

    def _check_empty_collections(self) -> None:
        """At the first saved step: one warning naming each included collection that can match nothing."""
        self._checked_empty = True
        empty = self.policy.empty_included()
        if not empty:
            return
        known = [c.name for c in self.collection_manager if c.name not in empty] + sorted(KNOWN_NAMES)
        for name in empty:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            logger.warning(
                "collection %r is included but can match nothing at the first saved step (no include_regex, tensor "
                "names or modules); it saves nothing until you add some, e.g. hook.get_collection(%r).include(regex)%s",
                name, name, hint,
            )

    @guarded
    def flush(self) -> None:
        """Wait until every file of the completed steps is written."""
        if self._out is not None:
            self._out.flush()

    def close(self) -> None:
        """End training: finish the open step, write the collections file and the end marker.

        The end marker (``training_job_end.ts``) is not written inside SageMaker (``TRAINING_JOB_NAME``
        set), where the platform marks the end itself; with ``include_workers="all"`` every worker
        writes it when it closes (as smdebug does). Safe to call twice; never raises.
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._disabled:
                if self._out is not None:
                    self._out.abort_step()
            else:
                if self._held:
                    self._ensure_step()
                    self._write_held()
                if self._in_step:
                    self._end_step()
            if self._out is not None:
                self._out.close(end_marker="TRAINING_JOB_NAME" not in os.environ)
        except Exception:  # noqa: BLE001 - close runs at exit too; never raise into the training script
            self._fail("close")
        finally:
            self._disabled = True
            if self._timeline is not None:
                self._timeline.close()  # never raises
            registry.forget(self)
            if self._claim is not None:
                self._claim.release()
            if termination.pending is not None:  # a SIGTERM waited for this close to end
                termination.leaving(inspect.currentframe())

    def _get_worker_name(self) -> str:
        """This process's worker name, ``worker_{rank}`` (smdebug's name for it; also :attr:`worker`)."""
        if self._worker_ready:
            return self.worker
        rank = self._rank if self._rank is not None else self._distributed_info()[0]
        return f"worker_{rank}"

    def _cleanup(self) -> None:
        """smdebug's name for what runs at exit: the same as :meth:`close`."""
        self.close()

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        # A model holding this hook's callbacks pickles (torch.save(model)) without the hook: it
        # unpickles with a DetachedHook in its place, whose callbacks do nothing.
        return DetachedHook, ()

    # --- lifecycle -------------------------------------------------------------------------------

    def _setup_worker(self) -> None:
        """Resolve rank and world size (first step); open the output if this worker writes."""
        if self._rank is not None and self._world_size is not None:
            rank, size = self._rank, self._world_size
        else:
            rank, size = self._distributed_info()
        self.worker = f"worker_{rank}"
        writes = self.include_workers == "all" or rank == 0
        self._num_workers = size if self.include_workers == "all" else 1
        self._worker_ready = True
        if writes and not self.dry_run and size == 1 and self._rank is None and isinstance(self.storage, LocalStorage):
            writes = self._claim_trial()
        if writes and not self.dry_run:
            tb_dir = self.tensorboard_dir if self.export_tensorboard else None
            if tb_dir is not None and "://" in tb_dir:
                logger.warning("TensorBoard export needs a local tensorboard_dir, got %s; not exporting", tb_dir)
                tb_dir = None
            self._out = TrialOutput(
                self.storage, worker=self.worker, collections=self._collections_file, clock=self._clock,
                tensorboard_dir=tb_dir,
            )
        if not self.dry_run:
            self._start_timeline(rank if size > 1 else None)
        atexit.register(_close_at_exit, weakref.ref(self))
        termination.watch(self)  # a stop (SIGTERM) writes the open step too

    def _start_timeline(self, rank: int | None) -> None:
        """With profiling on (the job's profilerconfig.json), record each step in the step timeline."""
        from sdk_ext.profiler import timeline

        if self._timeline_started:  # record_trace_events started it before the first step
            return
        self._timeline_started = True
        try:
            made = timeline.from_config(rank, global_mode_as=self.timeline_global_mode)
            if made is not None:
                self._timeline = made[0]
                self._add_step_observers(made[0], made[1])
        except Exception:  # noqa: BLE001 - profiling must not stop saving tensors, nor training
            logger.exception("sdk_ext hook: the step timeline could not start; steps are not timed")
            self._timeline = None

    def _add_step_observers(self, timeline: StepTimeline, settings: ProfilingConfig) -> None:
        """Frameworks add what runs over a window of steps (PyTorch: the detailed profiling window)."""

    def _claim_trial(self) -> bool:
        """A process without a rank writes only if no other live process writes this trial (see
        :mod:`sdk_ext.hooks.claim`)."""
        assert isinstance(self.storage, LocalStorage)
        claim = TrialClaim(self.storage.root)
        if claim.acquire():
            self._claim = claim
            return True
        logger.warning(
            "sdk_ext hook (pid %d): another process is writing the trial %s as worker_0 (it holds %s), so this "
            "one saves nothing. Processes started with torch.multiprocessing or multiprocessing have no rank "
            "of their own; to save from each, initialize torch.distributed before the first step (each then "
            "writes as worker_{rank}) or give each its own out_dir.",
            os.getpid(), self.out_dir, claim.path,
        )
        return False

    def _distributed_info(self) -> tuple[int, int]:
        """(rank, world size) as the framework sees it (frameworks override), else as a launcher's or
        TensorFlow's environment says (:mod:`sdk_ext.hooks.workers`), else one worker."""
        return workers.environment_rank(os.environ) or (0, 1)

    def _collections_file(self) -> CollectionsFile:
        return self.collection_manager.to_file(
            num_workers=self._num_workers, default_save=self.save_config, default_reduction=self.reduction_config
        )

    # --- values ----------------------------------------------------------------------------------

    def _to_numpy(self, value: Any) -> np.ndarray[Any, Any]:
        return to_numpy(value)

    def _save(self, name: str, plan: TensorPlan, value: Any) -> None:
        """Write ``value`` as ``plan`` says; frameworks override to reduce on their own tensors."""
        self._write(name, plan, self._to_numpy(value), {})

    def _write(
        self,
        name: str,
        plan: TensorPlan,
        array: np.ndarray[Any, Any] | None,
        reductions: Reductions,
        *,
        shape: tuple[int, ...] | None = None,
        content: Sequence[Buffer] | None = None,
    ) -> None:
        if self._out is not None:
            self._out.write(name, plan, array, reductions, shape=shape, content=content)

    def _warn_once(self, name: str, kind: str, msg: str, *args: object) -> None:
        if self._out is not None:
            self._out.warn_once(name, kind, msg, *args)
        else:
            logger.debug(msg, *args)


class DetachedHook:
    """What a hook becomes when an object that referred to it is unpickled (a model saved with
    ``torch.save(model)`` while a hook was registered): it saves nothing, and its callbacks (any method)
    do nothing, so the unpickled model runs as if no hook were registered."""

    disabled = True
    closed = True

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("__"):
            raise AttributeError(name)
        return _do_nothing

    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return DetachedHook, ()


def _do_nothing(*args: Any, **kwargs: Any) -> None:
    return None


termination.ENTRY_POINTS.add(Hook.close.__code__)  # a SIGTERM during close() waits for it (termination.py)

__all__ = ["SCALAR_PREFIX", "DetachedHook", "Hook", "guarded"]
