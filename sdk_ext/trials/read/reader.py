"""How a trial reads values for its tensors: one at a time, a batch, or one tensor over many steps.

:class:`Reads` sits between :class:`~sdk_ext.trials.Tensor` (which finds step files and records)
and :class:`~sdk_ext.trials.read.event_files.ValueReader` (which fetches and decodes): it keeps the optional
value cache (``create_trial(cache=True)``), starts read-ahead on the one-at-a-time path, keeps the
step plans of the many-steps path (:mod:`sdk_ext.trials.read.many_steps`), and turns an event file that never
came into smdebug's TensorUnavailableForStep.

Value read-ahead. ``for step in tensor.steps(): tensor.value(step)`` is how smdebug users read a
tensor, and one value at a time costs a few microseconds of Python, far more than decoding a small
record. So when ``value()`` is called for one tensor at two of its steps in a row, one right after
the other in the same mode and for the same ``worker`` (no other tensor's value in between), the
next steps of that tensor are decoded in one batch (the many-steps path) and handed out by the
following calls, each value once. The window starts at ``AHEAD_FIRST`` steps and grows while the
walk goes on (16-fold on storage read straight into memory, local disk, where a file costs
microseconds; fourfold elsewhere, where the files of steps never read would cost round trips), up
to ``TrialOptions.read_ahead_bytes`` of values (0 turns read-ahead off) and to the event files one
cache chunk holds; a walk that follows one read to its end starts as large as that one got. Only
records under ``AHEAD_RECORD`` bytes take part (larger ones cost their copy, not Python). A
step-major loop (every tensor of a step, then the next step) or one that samples every n-th step
never starts a window, and only one window is kept. A window that cannot be batched (a file missing
or too large, a damaged record) is not made: the one-at-a-time read then gives the value or the
precise error. New step files (a refresh) drop the window.

Read-ahead across workers. A rule comparing workers asks every worker for a tensor at a step, step
after step (``for step: for tensor: for worker: tensor.value(step, worker=w)``): consecutive calls change
worker, so the walk above never starts. When ``value()`` is called for one tensor at one step for a
second worker right after the first (same mode), the tensor's records of every worker holding it at
that step are decoded in one batch (a plan across workers: :mod:`sdk_ext.trials.read.step_plan`), and
the following calls take their values from that window, each once. The next miss of that tensor
at the step just past the window continues the walk with a window of more steps (fourfold each
time), so step after step most values come out of batches. Several tensors are walked in turn, so
each keeps its own window; their values together stay within ``read_ahead_bytes``: a window gets
the share of its tensor among those walked in turn (the windows made since its last one), and the
oldest windows are dropped past the bound. Only records under ``AHEAD_RECORD`` bytes take part, and
a window that cannot be batched (a worker without the tensor at a step, a damaged record, a file
missing) is not made: the calls then read one value each, which gives the value or the precise
error.

A window is a slice of one step plan: the plan of the tensor's whole step list, which every
window of the walk, the walks of every other tensor saved at the same steps, and ``values()`` at
those steps share (:mod:`sdk_ext.trials.read.step_plan` works it out a block of steps at a time, as reads
reach them). So a window costs its own steps whatever the length of the walk, and no tensor pays
for locating steps another tensor already located, whatever its windows' sizes.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdk_ext.exceptions import SdkExtError, TensorUnavailableForStep
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import Capabilities, Storage
from sdk_ext.trials.index.step_files import Location, StepFile
from sdk_ext.trials.index.trial_index import TrialIndex
from sdk_ext.trials.options import TrialOptions
from sdk_ext.trials.read.event_files import EventFileUnavailable, ValueReader
from sdk_ext.trials.read.many_steps import read_values
from sdk_ext.trials.read.step_plan import StepPlan

#: fewer steps than this are read step by step (a plan and array operations cost more than they save)
BULK_MIN = 16
#: step plans kept (one per distinct list of steps read with ``Tensor.values`` or walked with ``value()``)
_PLANS = 16
#: steps in the first read-ahead window of a tensor; the next windows of the same walk grow (see above)
AHEAD_FIRST = 64
#: records of this size and more are never read ahead
AHEAD_RECORD = 16 << 10
#: tensors whose walk across workers is remembered (least recently walked out)
ACROSS_TENSORS = 1024

Array = np.ndarray[Any, Any]


@dataclass(slots=True)
class Across:
    """One tensor's walk across workers: its window and how the next one continues it."""

    mode: ModeKeys
    workers: tuple[str, ...]  # the workers of each step of the window, in order
    values: dict[tuple[int, str], Array]  # (step, worker) -> value read ahead, not handed out yet
    next_step: int  # the step just past the window (-1: the walk reached the tensor's last step)
    steps: int  # steps in the window
    tick: int  # Reads' count of windows across workers when this one was made
    nbytes: int  # bytes of the window's records


class Reads:
    """The value reads of one trial; ``cache=True`` keeps every value read (smdebug's ``cache``)."""

    def __init__(
        self,
        storage: Storage,
        options: TrialOptions,
        index: TrialIndex,
        *,
        capabilities: Capabilities,
        training_ended: Callable[[], bool],
        cache: bool = False,
    ) -> None:
        self.reader = ValueReader(storage, options, capabilities=capabilities, training_ended=training_ended,
                                  checked=index.checked.get)
        self._index = index
        self._ahead_bytes = options.read_ahead_bytes
        self._ahead_growth = 16 if capabilities.direct_reads is not None else 4
        self._memo: dict[tuple[str, int], Array] | None = {} if cache else None
        self._plans: dict[tuple[Any, ...], StepPlan] = {}  # oldest first
        #: the plan of the last read-ahead walk, with what it was made for (_plan_key: steps list, length,
        #: index generation, mode, worker)
        self._walk_at: tuple[tuple[Any, ...], StepPlan] | None = None
        # value read-ahead: the last tensor, mode, worker and step read, and the walk
        self.last_name: str | None = None
        self.last_mode: ModeKeys | None = None
        self.last_worker: str | None = None
        self.last_step = -1
        self._walk: tuple[str, ModeKeys, str | None] | None = None  # the tensor, mode and worker of the walk
        #: the steps list of the last window's walk (a walk of the next tensor through it starts at once)
        self.walk_steps: Sequence[int] | None = None
        #: the tensor whose values ``ahead_values`` holds (None: no window); Tensor.value takes its values from there
        self.ahead_name: str | None = None
        self.ahead_mode: ModeKeys | None = None  # the mode and worker of ahead_name's window
        self.ahead_worker: str | None = None
        self.ahead_values: dict[int, Array] = {}  # step -> value read ahead, not handed out yet
        index.on_new_files = self.drop_windows  # new step files may change which file holds a step
        self._ahead_steps = 0  # size of the next window of ahead_name's walk
        #: (tensor, mode, worker, index generation) whose window failed
        self._no_ahead: tuple[str, ModeKeys, str | None, int] | None = None
        #: tensor -> its walk across workers (oldest first); Tensor.value takes values from its window
        self.across: dict[str, Across] = {}
        self._across_bytes = 0  # bytes of the windows across workers
        self._across_made = 0  # windows across workers made so far
        #: the plan of the last walk across workers, with what it was made for (_plan_key, workers for worker)
        self._across_at: tuple[tuple[Any, ...], StepPlan] | None = None
        self._no_across: dict[tuple[str, ModeKeys], int] = {}  # (tensor, mode) -> generation its window failed at

    def read(self, sf: StepFile, loc: Location, name: str, step: int, mode: ModeKeys) -> Array:
        """The value of the record ``loc`` of ``sf`` (``name`` at ``step`` of ``mode``, for errors)."""
        memo = self._memo
        if memo is None:  # the common case: the event file is in the file cache
            entry = self.reader.cache.get(sf.event_key)  # type: ignore[arg-type]
            if entry is not None:
                return self.reader.decode_cached(entry, sf.event_key, loc[0], loc[1], name)  # type: ignore[arg-type]
        else:
            hit = memo.get((sf.key, loc[0]))
            if hit is not None:
                return hit
        if sf.event_key is None:
            raise TensorUnavailableForStep(name, step, mode)
        self.reader.read_ahead(self._index, sf)
        try:
            value = self.reader.read(sf.event_key, loc[0], loc[1], sf.event_size, name)
        except EventFileUnavailable as err:
            raise TensorUnavailableForStep(name, step, mode) from err
        if memo is not None:
            memo[(sf.key, loc[0])] = value
        return value

    @property
    def ahead(self) -> dict[int, Array]:
        """The values read ahead and not handed out yet (of the tensor ``ahead_name``), a copy."""
        return dict(self.ahead_values)

    def take_ahead(self, name: str, mode: ModeKeys, step: int, worker: str | None = None) -> Array | None:
        """The value of ``name`` at ``step`` of ``mode`` (from ``worker``, None: the first holder) if the
        window holds it (handed out once), else None."""
        if name != self.ahead_name or mode is not self.ahead_mode or worker != self.ahead_worker:
            return None
        return self.ahead_values.pop(step, None)

    def drop_ahead(self) -> None:
        """Drop the window of the walk through one tensor's steps."""
        self.ahead_name = None
        self.ahead_mode = None
        self.ahead_worker = None
        self.ahead_values = {}

    def drop_windows(self) -> None:
        """Drop every window (new step files may change which file holds a step)."""
        self.drop_ahead()
        self.across.clear()
        self._across_bytes = 0

    def read_ahead(
        self,
        name: str,
        sf: StepFile,
        loc: Location,
        step: int,
        previous: int | None,
        mode: ModeKeys,
        steps: Sequence[int],
        worker: str | None = None,
    ) -> Array | None:
        """The value of tensor ``name`` at ``step`` of ``mode`` (from ``worker``; None: the first
        worker holding it) (record ``loc`` of ``sf``) from a new
        read-ahead window over the tensor's ``steps`` from there on, or None (no window: read it one
        at a time). ``Tensor.value`` calls this on a miss when the last value read was this tensor's,
        at the earlier step ``previous``; only a walk through every step (``previous`` is the step
        just before) gets a window, not one that samples a step now and then. ``previous`` None: a
        walk through ``steps`` (the same list; another tensor's, or another worker's) just ended at its
        last step and this is the first step: the next walk, which starts with a window at once. The window
        stays here; the tensor's next calls take their values from :attr:`ahead_values`."""
        index = self._index
        walk = (name, mode, worker)
        length, file_size = loc[1], sf.event_size
        ranged = self.reader.ranged(index.event_bytes)  # windows then gather records, not files
        if (
            self._memo is not None
            or not self._ahead_bytes
            or length >= AHEAD_RECORD
            or (file_size > self.reader.whole_file_bytes and not ranged)
            or self._no_ahead == (name, mode, worker, index.generation)
        ):
            return None
        at = bisect.bisect_left(steps, step)
        if previous is None:
            if at != 0 or not steps or steps[0] != step:
                return None
        elif at == 0 or at == len(steps) or steps[at] != step or steps[at - 1] != previous:
            return None  # not the next step of a walk through every step
        most = max(self._ahead_bytes // max(length, 1), BULK_MIN)  # steps in a window at most
        if walk != self._walk:  # a new walk: as long as the last one's if that one was read to its end
            size = self._ahead_steps if self._walk is not None and not self.ahead_values else AHEAD_FIRST
            self._walk, self._ahead_steps = walk, size
        self.drop_ahead()
        size = min(self._ahead_steps, most)
        if not ranged:  # the window's files are read whole into one cache chunk
            size = min(size, max(self.reader.cache.chunk_limit // max(file_size, 1), BULK_MIN))
        self._ahead_steps = min(self._ahead_growth * size, most)
        window = steps[at : at + size]
        if len(window) < BULK_MIN:
            return None
        try:
            got = read_values(self.reader, self._walk_plan(steps, mode, worker), name, at, at + size)
        except SdkExtError:  # a damaged record, a file that never came: the one-at-a-time read says so
            got = None
        if got is None:
            self._no_ahead = (name, mode, worker, index.generation)
            return None
        self.ahead_values = dict(zip(window[1:], got[1:]))
        self.ahead_mode = mode
        self.ahead_worker = worker
        self.ahead_name = name
        self.last_step = window[-1]  # so that the step just past the window continues the walk
        self.walk_steps = steps
        return got[0]

    def read_across(
        self,
        name: str,
        sf: StepFile,
        loc: Location,
        step: int,
        mode: ModeKeys,
        worker: str,
        started: bool,
        tensor_steps: Callable[[], Sequence[int]],
    ) -> Array | None:
        """The value of ``name`` at ``step`` of ``mode`` from ``worker`` (record ``loc`` of ``sf``) from a new
        window across workers, or None (read it alone). ``Tensor.value`` calls this on a miss with
        ``started`` True when the call before was for the same tensor, mode and step from another
        worker; a miss at the step just past the tensor's last window continues its walk whatever
        came before. ``tensor_steps`` gives the tensor's steps of ``mode``. The window stays in
        :attr:`across`; the next calls take their values from it."""
        index = self._index
        walk = self.across.get(name)
        if walk is not None and (walk.mode is not mode or walk.next_step != step):
            walk = None  # not the step its walk goes on at
        length = loc[1]
        if (
            (walk is None and not started)
            or self._memo is not None
            or not self._ahead_bytes
            or length >= AHEAD_RECORD
            or (sf.event_size > self.reader.whole_file_bytes and not self.reader.ranged(index.event_bytes))
            or self._no_across.get((name, mode)) == index.generation
        ):
            return None
        steps = tensor_steps()
        at = bisect.bisect_left(steps, step)
        if at == len(steps) or steps[at] != step:
            return None
        workers = walk.workers if walk is not None else self._holders(name, step, mode)
        width = len(workers)
        if width < 2 or worker not in workers:
            return None
        if walk is None:
            size = 1  # this step's workers; the walk's next windows grow
        else:  # this tensor's share of the budget among the tensors walked in turn since its last window
            share = self._ahead_bytes // max(1, self._across_made - walk.tick + 1)
            size = max(1, min(4 * walk.steps, share // (width * max(length, 1))))
        if not self.reader.ranged(index.event_bytes):  # the window's files are read whole into one cache chunk
            size = max(1, min(size, self.reader.cache.chunk_limit // (width * max(sf.event_size, 1))))
        size = min(size, len(steps) - at)
        try:
            got = read_values(self.reader, self._across_plan(steps, mode, workers), name, at * width,
                              (at + size) * width)
        except SdkExtError:  # a damaged record, a file that never came: the one-at-a-time read says so
            got = None
        if got is None:
            self._no_across[(name, mode)] = index.generation
            self._drop_across(name)
            return None
        values = dict(zip([(s, w) for s in steps[at : at + size] for w in workers], got))
        value = values.pop((step, worker))
        self._drop_across(name)
        self._across_made += 1
        nbytes = length * len(got)
        end = at + size
        self.across[name] = Across(mode, workers, values, steps[end] if end < len(steps) else -1, size,
                                   self._across_made, nbytes)
        self._across_bytes += nbytes
        self._bound_across()
        return value

    def _holders(self, name: str, step: int, mode: ModeKeys) -> tuple[str, ...]:
        """The workers whose step files at ``step`` of ``mode`` list ``name``, in worker order."""
        found = self._index.files_at(step, mode)
        return tuple(f.worker for f in found[1] if name in f.names) if found is not None else ()

    def _drop_across(self, name: str) -> None:
        walk = self.across.pop(name, None)
        if walk is not None:
            self._across_bytes -= walk.nbytes

    def _bound_across(self) -> None:
        """Keep the windows across workers within ``read_ahead_bytes`` (and the walks remembered within
        ``ACROSS_TENSORS``): the oldest windows go first, the newest stays."""
        across = self.across
        if self._across_bytes > self._ahead_bytes:
            newest = next(reversed(across.values()))
            for walk in across.values():
                if self._across_bytes <= self._ahead_bytes or walk is newest:
                    break
                if walk.nbytes:
                    self._across_bytes -= walk.nbytes
                    walk.values, walk.nbytes = {}, 0
        while len(across) > ACROSS_TENSORS:
            self._drop_across(next(iter(across)))

    def _across_plan(self, steps: Sequence[int], mode: ModeKeys, workers: tuple[str, ...]) -> StepPlan:
        """The plan across ``workers`` of a walk through ``steps`` (every tensor saved at the same steps by
        the same workers shares it); found by the list's identity while it holds."""
        held, key = self._across_at, self._plan_key(steps, mode, workers)
        if held is not None and self._same_plan_key(held[0], key):
            return held[1]
        plan = self._plan(steps, mode, None, across=workers)
        self._across_at = (key, plan)
        return plan

    def _plan_key(self, steps: Sequence[int], mode: ModeKeys, who: object) -> tuple[Any, ...]:
        """What a held plan was made for: the step list itself (by identity) and its length, the index's
        generation, the mode, and the worker (or workers)."""
        return (steps, len(steps), self._index.generation, mode, who)

    @staticmethod
    def _same_plan_key(held: tuple[Any, ...], key: tuple[Any, ...]) -> bool:
        return held[0] is key[0] and held[1:3] == key[1:3] and held[3] is key[3] and held[4] == key[4]

    def read_many(
        self,
        located: Sequence[tuple[StepFile, Location]],
        name: str | Sequence[str],
        steps: Sequence[int],
        mode: ModeKeys,
    ) -> list[Array]:
        """The values of several records, their storage requests in one batch; ``name`` is the
        records' tensor name, or one per record."""
        names = [name] * len(located) if isinstance(name, str) else list(name)
        if self._memo is not None or any(sf.event_key is None for sf, _ in located):
            return [self.read(sf, loc, n, step, mode) for (sf, loc), n, step in zip(located, names, steps)]
        try:
            return self.reader.read_many(
                [(sf.event_key, s, n, sf.event_size, t) for (sf, (s, n)), t in zip(located, names)]  # type: ignore[misc]
            )
        except EventFileUnavailable as err:  # already waited for: say which step, do not wait again
            at = next((k for k, (sf, _) in enumerate(located) if sf.event_key == err.key), 0)
            raise TensorUnavailableForStep(names[at], steps[at], mode) from err

    def read_steps(self, name: str, steps: Sequence[int], mode: ModeKeys, worker: str | None) -> list[Array] | None:
        """The raw values of ``name`` at ``steps``, many per call; None where the step-by-step path is needed."""
        if self._memo is not None or len(steps) < BULK_MIN:
            return None
        plan = self._plan(steps, mode, worker)
        try:
            return read_values(self.reader, plan, name)
        except EventFileUnavailable as err:  # already waited for: say which step, do not wait again
            located = plan.locate(name)
            numbers = [] if located is None else located[0].tolist()
            step = next((s for s, k in zip(steps, numbers) if plan.files[k].event_key == err.key), steps[0])
            raise TensorUnavailableForStep(name, step, mode) from err

    def _walk_plan(self, steps: Sequence[int], mode: ModeKeys, worker: str | None) -> StepPlan:
        """The step plan of a read-ahead walk through ``steps``: the plan of the whole list, which
        the walk's windows (and the walks of every tensor saved at the same steps, and ``values()``
        at them) share. Found by the list's identity while it holds, so a window costs nothing per
        step of the whole walk."""
        held, key = self._walk_at, self._plan_key(steps, mode, worker)
        if held is not None and self._same_plan_key(held[0], key):
            return held[1]
        plan = self._plan(steps, mode, worker)
        self._walk_at = (key, plan)
        return plan

    def _plan(
        self, steps: Sequence[int], mode: ModeKeys, worker: str | None, *, across: tuple[str, ...] | None = None
    ) -> StepPlan:
        """The step plan for ``steps`` (kept for the next tensors read at the same steps)."""
        index = self._index
        key = (index.generation, mode, worker, across, tuple(steps))
        plan = self._plans.get(key)
        if plan is None:
            for old in [k for k in self._plans if k[0] != index.generation]:  # never asked for again
                del self._plans[old]
            plan = self._plans[key] = StepPlan(index, steps, mode, worker, across=across)
            while len(self._plans) > _PLANS:
                del self._plans[next(iter(self._plans))]
        return plan


__all__ = ["ACROSS_TENSORS", "BULK_MIN", "Across", "Reads"]
