"""``create_trial`` (smdebug's entry point) and ``no_refresh`` (smdebug's ``analysis.utils.no_refresh``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.storage import Storage, open_storage
from sdk_ext.trials.options import TrialOptions
from sdk_ext.trials.trial import Trial


def create_trial(
    path: str | os.PathLike[str] | Storage,
    name: str | None = None,
    range_steps: Sequence[int | None] | None = None,
    *,
    options: TrialOptions | None = None,
    timeout: float | None = None,
    cache: bool = False,
    parallel: bool = True,
    check: bool = False,
    index_mode: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Trial:
    """Open the trial at ``path`` (a local directory, ``s3://bucket/prefix``, or a Storage).

    Args:
        path: the hook's output directory (SageMaker: the job's ``.../debug-output`` prefix).
        name: defaults to the last path component.
        range_steps: ``(begin, end)``: only global steps ``begin <= step < end``; either may be None.
        options: waiting and caching knobs (:class:`TrialOptions`); by default those of smdebug's
            environment variables (``SMDEBUG_TRAINING_END_DELAY_REFRESH`` and the others of
            :meth:`TrialOptions.from_env`), as smdebug's ``create_trial`` honours them.
        timeout: shortcut for ``options.collections_timeout``: how long to wait for the first
            collections file before raising MissingCollectionFiles.
        cache: keep every value read in memory (smdebug's ``cache``).
        parallel, check: accepted for smdebug compatibility; they have no effect (as in smdebug).
        index_mode: must be True (smdebug's event-file-only mode was never implemented).
        cache_dir: for ``s3://`` paths, a local directory that keeps downloaded objects, so the next
            analysis of the same trial does not download them again (listings are never cached).

    Raises:
        MissingCollectionFiles: see :meth:`Trial.load`.
        ConfigError: invalid ``range_steps`` or options.
    """
    if not index_mode:
        raise ConfigError("index_mode=False is not supported (smdebug never implemented it)", where="create_trial")
    del parallel, check
    if isinstance(path, (str, os.PathLike)):
        text = os.fspath(path).strip()
        storage: Storage = open_storage(text, cache_dir=cache_dir)
    else:
        storage = path
    opts = options if options is not None else TrialOptions.from_env(os.environ)
    if timeout is not None:
        opts = opts.with_changes(collections_timeout=timeout)
    trial = Trial(storage, name=name, range_steps=range_steps, options=opts, cache=cache)
    if isinstance(path, (str, os.PathLike)):
        trial.location = text
    return trial.load()


@contextlib.contextmanager
def no_refresh(trials: Trial | Iterable[Trial]) -> Iterator[Any]:
    """Within the block, queries use what was read already (smdebug's ``analysis.utils.no_refresh``).

    Yields what it was given, as smdebug does: ``with no_refresh([trial]) as [t]:`` or
    ``with no_refresh(trial) as t:``.
    """
    group = [trials] if isinstance(trials, Trial) else list(trials)
    previous = [t.dynamic_refresh for t in group]
    for t in group:
        t.dynamic_refresh = False
    try:
        yield trials if isinstance(trials, Trial) else group
    finally:
        for t, value in zip(group, previous):
            t.dynamic_refresh = value


@contextlib.contextmanager
def refresh(trials: Trial | Iterable[Trial]) -> Iterator[Any]:
    """Within the block, queries read what was written since (smdebug's ``analysis.utils.refresh``, the
    opposite of :func:`no_refresh`); the previous setting comes back after. Yields what it was given."""
    group = [trials] if isinstance(trials, Trial) else list(trials)
    previous = [t.dynamic_refresh for t in group]
    for t in group:
        t.dynamic_refresh = True
    try:
        yield trials if isinstance(trials, Trial) else group
    finally:
        for t, value in zip(group, previous):
            t.dynamic_refresh = value


__all__ = ["create_trial", "no_refresh", "refresh"]
