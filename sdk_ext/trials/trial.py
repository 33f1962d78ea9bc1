"""A trial: the tensors one training job saved, read through any Storage (local directory, S3, memory).

``create_trial(path)`` follows smdebug's reader (docs/FORMAT.md#reader-semantics) so rules and notebooks
behave the same, with these deliberate differences:

* an empty or wrong path raises MissingCollectionFiles after ``collections_timeout`` (smdebug
  waited forever unless the end-of-training marker existed);
* ``tensor_names(mode=X)`` for a mode never seen, or ``step=`` a step never saved, returns ``[]``
  (smdebug raised KeyError);
* no 1 s sleep at the end of a one-worker job: the marker is checked before the listing that
  follows it, so that listing holds every index file written before the marker (with several
  workers, each writes the marker as it closes: the reader waits ``training_end_delay``, 1 s, but only
  while some worker has not written the last step listed);
* ``wait_for_steps`` leaves ``dynamic_refresh`` as it found it (smdebug switched it off for good);
* asking for the tensor names of an unknown collection does not create it (``collection(name)`` does,
  as in smdebug, so an analysis can edit it).

A bad ``range_steps`` raises InvalidRangeSteps: a ConfigError that is also the AssertionError smdebug
raised, so either ``except`` clause catches it.

Value-level differences (every dtype, values saved with their shape, ``__`` in paths, norms of
3-D tensors) are described where they happen (format, index_cache, reductions).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sdk_ext.exceptions import ConfigError, TensorUnavailable
from sdk_ext.format.paths import END_OF_JOB, index_key, serialize_worker
from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.storage import Storage, open_storage
from sdk_ext.trials.collections import Collection
from sdk_ext.trials.display import TrialDisplay
from sdk_ext.trials.index.trial_index import TrialIndex, check_range_steps
from sdk_ext.trials.loading import collection_workers, wait_for_collections
from sdk_ext.trials.mappings import TrialMappings
from sdk_ext.trials.options import TrialOptions
from sdk_ext.trials.read.reader import Reads
from sdk_ext.trials.tensor import Tensor
from sdk_ext.trials.waiting import step_state, wait_for_steps

logger = logging.getLogger(__name__)

_GLOBAL = ModeKeys.GLOBAL


class InvalidRangeSteps(ConfigError, AssertionError):
    """``range_steps`` is not ``(begin, end)`` with ``begin <= end``; smdebug raised AssertionError here."""


class Trial(TrialMappings, TrialDisplay):
    """The saved tensors of one training job. Build it with :func:`create_trial`.

    Besides the query methods, smdebug's step tables that custom rules read (``_global_to_mode``,
    ``_mode_to_global``, ``workers_for_global_step``...) are read-only views: :mod:`sdk_ext.trials.mappings`.

    The constructor only assigns; :meth:`load` (called by ``create_trial``, or lazily by the first
    query) waits for the collections file and reads the index.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        name: str | None = None,
        range_steps: Sequence[int | None] | None = None,
        options: TrialOptions | None = None,
        cache: bool = False,
    ) -> None:
        self.storage = storage
        self.path = storage.uri
        #: the path as the user gave it (``create_trial`` sets it); :attr:`last_index_token` is under it
        self.location = storage.uri
        self.name = name if name is not None else os.path.basename(storage.uri.rstrip("/"))
        try:
            self.range_steps = check_range_steps(range_steps)
        except ConfigError as err:
            raise InvalidRangeSteps(err.problems, where="range_steps") from None
        self.options = options or TrialOptions()
        #: False inside rules' ``no_refresh``: queries then use what was already read
        self.dynamic_refresh = True
        capabilities = storage.capabilities()  # once, for the index and the read path
        self._index = TrialIndex(
            storage, capabilities=capabilities, range_steps=self.range_steps, incomplete_step_window=self.options.incomplete_step_window,
            lazy_index_files=self.options.lazy_index_files,
        )
        self._reads = Reads(storage, self.options, self._index, capabilities=capabilities,
                            training_ended=self._marker_present, cache=cache)
        self._collections: dict[str, Collection] | None = None
        self._workers: set[str] = set()
        self._ended = False
        self._loaded_all = False
        self._tensors: dict[str, Tensor] = {}

    def __repr__(self) -> str:
        return f"<Trial {self.name!r} at {self.path}>"

    # --- loading and refreshing ----------------------------------------------------------------------

    def load(self) -> Trial:
        """Wait for the collections files, then read every index file present. Returns self.

        Raises:
            MissingCollectionFiles: no collections file within ``collections_timeout`` seconds, or
                training ended without one (or with fewer than the workers it announced).
        """
        if self._collections is not None:
            return self
        doc, workers = wait_for_collections(self.storage, self.options, ended=self._marker_present)
        self._index.num_workers = doc.num_workers
        self._collections = {name: Collection(spec) for name, spec in doc.collections.items()}
        self._workers |= workers
        self._refresh_now()
        return self

    def _marker_present(self) -> bool:
        if not self._ended:
            self._ended = self.storage.exists(END_OF_JOB)
        return self._ended

    def refresh(self) -> None:
        """Read whatever was written since the last refresh (smdebug's ``refresh_data``)."""
        if self._collections is None:
            self.load()
        elif not self._loaded_all:
            self._refresh_now()

    def _maybe_refresh(self, *, lazy: bool = False) -> None:
        """Refresh as the refresh policy allows; then, unless ``lazy`` (the caller reads what it needs
        with ``TrialIndex.ensure``), read the index files a finished trial left pending."""
        if self._collections is None:
            self.load()
        elif self.dynamic_refresh and not self._loaded_all:
            self._refresh_now()
        if not lazy and self._index.pending:
            self._index.load()

    def _refresh_now(self) -> None:
        ended = self._marker_present()  # before listing: the listing then holds all the writer committed
        if len(self._workers) < self._index.num_workers:
            self._workers.update(collection_workers(self.storage).values())
        self._index.refresh(finished=ended)
        if ended:
            self._finish()

    def _finish(self) -> None:
        """Training ended: read the last index files, then never list again.

        The marker was checked before the listing just made, and a worker commits its index files
        before it writes the marker, so with one worker that listing holds everything: no wait.
        With several, every worker writes the marker when *it* closes, so the first one done may
        precede the others' last steps: wait ``training_end_delay`` (smdebug's 1 s) and list again,
        unless every worker has written the last step listed (the others are done with it too:
        data-parallel workers save the same steps), as in a trial opened after training.
        """
        index, opts = self._index, self.options
        last = index.last_step
        everyone = last >= 0 and index.workers_at(last) >= index.num_workers
        if index.num_workers > 1 and opts.training_end_delay > 0 and not everyone:
            logger.info("training ended; listing again in %g s for the other workers' last steps",
                        opts.training_end_delay)
            opts.clock.sleep(opts.training_end_delay)
            index.refresh(finished=True)
        self._loaded_all = True
        index.last_complete_step = max(index.last_complete_step, index.last_step)
        logger.debug("%s: loaded all steps (%s)", self.path, index.describe())

    @property
    def loaded_all_steps(self) -> bool:
        """True once training has ended and every step has been read."""
        return self._loaded_all

    @property
    def last_complete_step(self) -> int:
        """The highest global step every worker has written (-1 before any)."""
        return self._index.last_complete_step

    @property
    def last_index_token(self) -> str | None:
        """The index file of :attr:`last_complete_step` (of the last worker in name order), as smdebug names it.

        A refresh lists only index files after this one. It is a path under :attr:`location`, or for
        S3 the object key without the bucket; None until a step is complete.
        """
        step, workers = self._index.last_complete_step, self._index.known_workers
        if step < 0 or not workers:
            return None
        key = index_key(step, max(serialize_worker(w) for w in workers))
        if self.location.startswith("s3://"):
            prefix = self.location[len("s3://"):].partition("/")[2].strip("/")
            return f"{prefix}/{key}" if prefix else key
        return os.path.join(self.location, key)

    @property
    def num_workers(self) -> int:
        self._maybe_load()
        return self._index.num_workers

    def _maybe_load(self) -> None:
        if self._collections is None:
            self.load()

    # --- tensors ---------------------------------------------------------------------------------------

    def tensor_names(
        self,
        show_prefixed_tensors: bool = False,
        *,
        step: int | None = None,
        mode: ModeKeys = _GLOBAL,
        regex: str | Sequence[Any] | None = None,
        collection: str | Collection | None = None,
    ) -> list[str]:
        """Names of the saved tensors (reductions appear under their tensor's name), sorted.

        Args:
            show_prefixed_tensors: accepted for smdebug compatibility; it has no effect there either.
            step: only tensors saved at this step (a mode step unless ``mode`` is GLOBAL).
            mode: only tensors saved in this mode; ``[]`` for a mode the trial never saw.
            regex: a regex or a (nested) list of them; a name matches if any ``re.search`` finds it.
            collection: a collection name or object: its tensor names and include_regex matches.
        """
        if regex is not None and collection is not None:
            raise ConfigError("pass either regex or collection to tensor_names, not both", where="tensor_names")
        mode = ModeKeys.parse(mode)
        lazy = step is not None and mode is _GLOBAL  # one step's files are enough
        self._maybe_refresh(lazy=lazy)
        index = self._index
        names: Iterable[str]
        if step is not None:
            if lazy:
                index.ensure(step)
            found = index.files_at(step, mode)
            names = set().union(*(f.names for f in found[1])) if found else set()
        elif mode is _GLOBAL:
            names = index.names
        else:
            names = index.mode_names.get(mode, set())
        if collection is not None:
            if isinstance(collection, Collection):
                coll = collection
            else:  # a query by name does not create the collection (collection(name) does)
                coll_name = _collection_name(collection)
                coll = self.collections().get(coll_name) or Collection.empty(coll_name)
            selected = [n for n in names if coll.matches(n)]
            if not selected:
                logger.warning("no tensors from the collection %s were saved", coll.name)
            return sorted(selected)
        if regex is not None:
            patterns = [re.compile(p) for p in _flatten(regex)]
            selected = [n for n in names if any(p.search(n) for p in patterns)]
            if not selected:
                logger.warning("no saved tensor matches the regex %s", regex)
            return sorted(selected)
        return sorted(names)

    def has_tensor(self, tname: str) -> bool:
        index = self._index
        if tname in index.names:
            return True
        self._maybe_refresh(lazy=True)
        if tname in index.names:
            return True
        if index.pending:  # the newest step first (the value at the last step reads only that one), then all
            index.ensure(index.last_step)
            if tname in index.names:
                return True
            index.load()
        return tname in index.names

    def tensor(self, tname: str) -> Tensor:
        """The tensor ``tname``. Raises TensorUnavailable if it was never saved."""
        tensor = self._tensors.get(tname)
        if tensor is not None:
            return tensor
        if not self.has_tensor(tname):
            raise TensorUnavailable(tname)
        tensor = self._tensors[tname] = Tensor(
            tname, self, index=self._index, reads=self._reads, refresh=self._maybe_refresh
        )
        return tensor

    # --- steps and modes ------------------------------------------------------------------------------

    def steps(self, mode: ModeKeys = _GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        """Saved steps (mode steps unless GLOBAL), sorted; only complete ones unless asked."""
        mode = ModeKeys.parse(mode)
        self._maybe_refresh(lazy=mode is _GLOBAL)  # global steps are known from the index files' names
        index = self._index
        all_steps = index.mode_steps(mode)
        if show_incomplete_steps or self._loaded_all:
            return all_steps
        if mode is _GLOBAL:
            return [s for s in all_steps if index.is_complete(s)]
        table = index.mode_to_global.get(mode, {})
        return [s for s in all_steps if index.is_complete(table[s])]

    def modes(self) -> list[ModeKeys]:
        """The modes seen (never GLOBAL), in TRAIN, EVAL, PREDICT order."""
        self._maybe_load()
        self._index.load()
        return sorted(self._index.mode_to_global, key=lambda m: m.value)

    def mode_modestep(self, global_step: int) -> tuple[ModeKeys | None, int | None]:
        """``(mode, mode step)`` of a global step, or ``(None, None)`` if it is unknown."""
        self._maybe_load()
        self._index.ensure(global_step)
        found = self._index.global_to_mode.get(global_step)
        if found is None:
            self._maybe_refresh(lazy=True)
            self._index.ensure(global_step)
            found = self._index.global_to_mode.get(global_step)
        return found if found is not None else (None, None)

    def mode(self, global_step: int) -> ModeKeys | None:
        return self.mode_modestep(global_step)[0]

    def mode_step(self, global_step: int) -> int | None:
        return self.mode_modestep(global_step)[1]

    def global_step(self, mode: ModeKeys, mode_step: int) -> int | None:
        """The global step of ``mode_step`` in ``mode``, or None if it is unknown."""
        self._maybe_load()
        mode = ModeKeys.parse(mode)
        if mode is not _GLOBAL:
            self._index.load()
        found = self._index.global_of(mode_step, mode)
        if found is None:
            self._maybe_refresh()
            found = self._index.global_of(mode_step, mode)
        return found

    def workers(self) -> list[str]:
        """Workers that wrote a collections file, sorted."""
        self._maybe_refresh(lazy=True)
        return sorted(self._workers)

    def collections(self) -> dict[str, Collection]:
        self._maybe_load()
        assert self._collections is not None
        return dict(self._collections)

    def collection(self, coll_name: str) -> Collection:
        """The named collection; a new empty one, kept by the trial, if it defines none (as smdebug).

        An analysis may edit it (``include``, ``add_tensor_name``); ``tensor_names(collection=...)``
        then sees the edit. The files on disk never change.
        """
        self._maybe_load()
        assert self._collections is not None
        found = self._collections.get(coll_name)
        if found is None:
            found = self._collections[coll_name] = Collection.empty(coll_name)
        return found

    def has_passed_step(self, step: int, mode: ModeKeys = _GLOBAL) -> StepState:
        """AVAILABLE (complete), NOT_YET_AVAILABLE (may still come) or UNAVAILABLE (never will).

        Raises:
            IndexReaderException: an index file of ``step`` is damaged (damage is never "not available").
        """
        return step_state(self, self._index, step, ModeKeys.parse(mode))

    def damaged_steps(self) -> list[int]:
        """The global steps with an index file that could not be read (damaged), sorted; reading them raises."""
        self._maybe_load()
        return sorted(self._index.damaged)

    def wait_for_steps(
        self, required_steps: Iterable[int], mode: ModeKeys = _GLOBAL, *, timeout: float | None = None
    ) -> None:
        """Block until every step in ``required_steps`` is available.

        Polls every ``options.poll_interval`` seconds (refreshing even inside ``no_refresh``).

        Raises:
            StepUnavailable: a step was skipped by the writer.
            IndexReaderException: an index file of a step is damaged.
            NoMoreData: training ended before the step.
            StepNotYetAvailable: ``timeout`` seconds passed first (smdebug has no timeout).
        """
        wait_for_steps(self, required_steps, ModeKeys.parse(mode), timeout=timeout)


class LocalTrial(Trial):
    """smdebug's ``LocalTrial(name, dirname)``: the trial in a local directory (``create_trial`` is the usual way).

    It loads on the first query, so a missing directory raises MissingCollectionFiles there.
    """

    def __init__(self, name: str, dirname: str, range_steps: Sequence[int | None] | None = None,
                 parallel: bool = True, check: bool = False, index_mode: bool = True, cache: bool = False,
                 *, options: TrialOptions | None = None) -> None:
        del parallel, check, index_mode  # no effect, as in smdebug
        super().__init__(open_storage(dirname), name=name, range_steps=range_steps, options=options, cache=cache)
        self.location = os.fspath(dirname)


class S3Trial(Trial):
    """smdebug's ``S3Trial(name, bucket_name, prefix_name)``: the trial at ``s3://bucket_name/prefix_name``."""

    def __init__(self, name: str, bucket_name: str, prefix_name: str,
                 range_steps: Sequence[int | None] | None = None, parallel: bool = True, check: bool = False,
                 index_mode: bool = True, cache: bool = False, *, options: TrialOptions | None = None) -> None:
        del parallel, check, index_mode  # no effect, as in smdebug
        location = f"s3://{bucket_name}/{prefix_name.strip('/')}" if prefix_name.strip("/") else f"s3://{bucket_name}"
        super().__init__(open_storage(location), name=name, range_steps=range_steps, options=options, cache=cache)
        self.location = location


def _collection_name(collection: object) -> str:
    if isinstance(collection, str):
        return collection
    name = getattr(collection, "name", None)
    if isinstance(name, str):
        return name
    raise TypeError(f"collection must be a name or a Collection, got {type(collection).__name__}")


def _flatten(items: Any) -> Iterator[str]:
    if isinstance(items, str):
        yield items
        return
    for item in items:
        yield from _flatten(item)


__all__ = ["InvalidRangeSteps", "LocalTrial", "S3Trial", "Trial"]
