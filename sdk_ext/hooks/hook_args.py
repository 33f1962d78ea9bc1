"""Checking a hook's constructor arguments: every problem found, reported together, before training."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sdk_ext.exceptions import ConfigError, StorageError
from sdk_ext.format.paths import END_OF_JOB
from sdk_ext.hooks.collections import compile_regex
from sdk_ext.hooks.reduction_config import ReductionConfig
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode
from sdk_ext.storage import Storage, open_storage


@dataclass(frozen=True, slots=True)
class HookArgs:
    """The arguments in their checked, normalized form."""

    storage: Storage
    save_config: SaveConfig
    reduction_config: ReductionConfig | None
    include_regex: list[str]
    include_collections: list[str]

    @classmethod
    def check(
        cls,
        out_dir: str | os.PathLike[str] | Storage,
        *,
        dry_run: bool,
        reduction_config: ReductionConfig | None,
        save_config: SaveConfig | SaveConfigMode | dict[Any, Any] | int | None,
        include_regex: Iterable[str] | str | None,
        include_collections: Iterable[str] | str | None,
        include_workers: str,
        rank: int | None,
        world_size: int | None,
    ) -> HookArgs:
        """Raises ConfigError listing every problem.

        The only I/O: one look for the end marker of a finished trial in ``out_dir`` (a stat on a
        local disk, one LIST request on S3), through the Storage protocol, so every backend refuses
        to write into a finished trial.
        """
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
        storage = out_dir if isinstance(out_dir, Storage) else open_storage(out_dir)
        if not dry_run:
            problems += _finished_trial(storage)
        if problems:
            raise ConfigError(problems, where="hook configuration")
        return cls(storage, parsed_save, reduction_config, regexes, [str(n) for n in names])


def _finished_trial(storage: Storage) -> list[str]:
    """The problem with writing into ``storage`` if it holds a finished trial (or cannot be checked)."""
    marker = f"{storage.uri.rstrip('/')}/{END_OF_JOB}"
    try:
        finished = storage.exists(END_OF_JOB)
    except StorageError as err:
        return [f"out_dir {storage.uri}: could not check for a finished trial ({marker}): {err}"]
    if not finished:
        return []
    message = (f"out_dir {storage.uri} already holds a finished trial ({marker} exists); use a new out_dir, "
               "or delete the old trial first if you mean to replace it")
    return [message]


__all__ = ["HookArgs"]
