"""What to save, when: a pure function of the collections, the mode and the mode step.

Per step, :meth:`SavePolicy.begin_step` finds the *active* collections (their save config says
"save" for this mode step; gradients and optimizer variables only in TRAIN and GLOBAL). A tensor
is saved at a step when an active collection claims it:

* an *included* collection (``include_collections`` plus the framework's defaults; every
  collection when ``all`` is included) whose tensor names or regexes match its name, or
* a collection the caller names explicitly (``save_tensor(..., collections_to_write=...)``).

What gets written is the union over those collections: the raw value if any of them saves raw
values, the shape if any saves shapes, and every requested reduction once, in config order.
The step "is saved" when any included collection is active (``save_scalar`` values are written
at every step, saved or not: see :mod:`sdk_ext.hooks.hook`). Names in ``include_collections`` that
are no collection yet become empty collections, for the script to fill before training starts.
Nothing here does I/O; results are cached per tensor name and active set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from sdk_ext.hooks.collections import (
    NON_REDUCTION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    TRAIN_ONLY_COLLECTIONS,
    Collection,
    CollectionKeys,
    CollectionManager,
    note_change,
)
from sdk_ext.hooks.reduction_config import ReductionConfig
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode
from sdk_ext.modes import ALL_MODES, ModeKeys

logger = logging.getLogger(__name__)

_TRAIN_MODES = (ModeKeys.TRAIN, ModeKeys.GLOBAL)
_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class TensorPlan:
    """What to write for one tensor at one step."""

    raw: bool
    shape: bool
    ops: tuple[tuple[str, bool], ...]  # (op, abs), op as in tensor names (mean, l2)
    histogram: bool  # TensorBoard histogram
    scalar: bool  # TensorBoard scalar (member of a scalar collection)
    collections: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Resolved:
    coll: Collection
    save: SaveConfig
    reduction: ReductionConfig
    histogram: bool
    train_only: bool


class SavePolicy:
    """Decides, step by step, which tensors are saved and how."""

    def __init__(
        self,
        manager: CollectionManager,
        *,
        include_collections: Iterable[str],
        save_config: SaveConfig,
        reduction_config: ReductionConfig,
        builtin: Iterable[str] = (),
    ) -> None:
        self.manager = manager
        self.save_config = save_config.complete()
        self.reduction_config = reduction_config
        self._include = list(dict.fromkeys(include_collections))
        self._builtin = frozenset(builtin)
        self._version: object = None
        self._resolved: dict[str, _Resolved] = {}
        self._groups: dict[ModeKeys, list[tuple[SaveConfigMode, frozenset[str]]]] = {}
        self._included: tuple[str, ...] = ()
        self._active: frozenset[str] = frozenset()
        self._step_saved = False
        self._matching: dict[str, tuple[str, ...]] = {}
        self._plans: dict[tuple[frozenset[str], str, tuple[str, ...]], TensorPlan | None] = {}
        #: Set when a saved tensor became a new member of a collection (the collections file is stale).
        self.names_changed = False

    # --- configuration -------------------------------------------------------------------------

    @property
    def include_collections(self) -> list[str]:
        return list(self._include)

    def include(self, name: str) -> None:
        if name not in self._include:
            self._include.append(name)
            self._version = None
            note_change()

    def prepare(self) -> None:
        """Resolve every collection's configs; re-done only when a collection changed.

        A name in ``include_collections`` that is not a collection yet becomes an empty collection
        here (as in smdebug), so ``hook.get_collection(name)`` can fill it later; see
        :meth:`empty_included`.
        """
        version = self.manager.version
        if version == self._version:
            return
        for name in self._include:
            if name not in self.manager:
                self.manager.get(name)  # created empty; the caller may fill it before training
        version = self.manager.version
        resolved = {}
        for c in self.manager:
            save = self.save_config if c.save_config is None else c.save_config.merged_with(self.save_config)
            resolved[c.name] = _Resolved(
                coll=c,
                save=save,
                reduction=self.manager.effective_reduction(c, self.reduction_config),
                histogram=c.save_histogram and c.name not in NON_REDUCTION_COLLECTIONS,
                train_only=c.name in TRAIN_ONLY_COLLECTIONS,
            )
        self._resolved = resolved
        self._groups = {}
        for mode in ALL_MODES:  # collections that share a save config are decided together
            by_config: dict[SaveConfigMode, set[str]] = {}
            for name, r in resolved.items():
                if not (r.train_only and mode not in _TRAIN_MODES):
                    by_config.setdefault(r.save.get_save_config(mode), set()).add(name)
            self._groups[mode] = [(config, frozenset(names)) for config, names in by_config.items()]
        if CollectionKeys.ALL in self._include:
            self._included = tuple(resolved)
        else:
            self._included = tuple(n for n in self._include if n in resolved)
        self._matching.clear()
        self._plans.clear()
        self._version = version

    def empty_included(self) -> list[str]:
        """Included collections that can match nothing yet (no regex, tensor names or modules).

        Built-in names (``metrics``, ``sm_metrics``, ...) are left out: they are often filled by
        ``save_tensor`` and empty in a job that has none.
        """
        return [
            c.name
            for c in self.manager
            if (c.name in self._include or CollectionKeys.ALL in self._include)
            and c.name not in self._builtin
            and not (c.include_regex or c.tensor_names or c.modules)
        ]

    def effective_save_config(self, name: str) -> SaveConfig:
        self.prepare()
        return self._resolved[name].save

    # --- per step ------------------------------------------------------------------------------

    def begin_step(self, mode: ModeKeys, mode_step: int) -> bool:
        """Fix the active collections for a step; returns whether the step is saved."""
        if self.manager.version != self._version:
            self.prepare()
        active = _NONE
        for config, names in self._groups[mode]:
            if config.should_save_step(mode_step):
                active = active | names
        self._active = active
        self._step_saved = bool(active) and not active.isdisjoint(self._included)
        return self._step_saved

    def quiet_steps(self, mode: ModeKeys, mode_step: int, limit: int = 1 << 20) -> int:
        """How many steps after ``mode_step`` (same mode, collections unchanged) activate no collection."""
        nearest = limit
        for config, _ in self._groups.get(mode, ()):
            nxt = config.next_step_after(mode_step)
            if nxt is not None:
                nearest = min(nearest, nxt - mode_step - 1)
        return max(nearest, 0)

    @property
    def step_saved(self) -> bool:
        """Whether any included collection is active in the current step."""
        return self._step_saved

    @property
    def active(self) -> frozenset[str]:
        return self._active

    def could_save(self, name: str) -> bool:
        """Whether some included collection claims ``name`` at all (in any step)."""
        self.prepare()
        return bool(self._members(name))

    def _members(self, name: str) -> tuple[str, ...]:
        found = self._matching.get(name)
        if found is None:
            found = tuple(n for n in self._included if self._resolved[n].coll.matches(name))
            self._matching[name] = found
        return found

    def plan(self, name: str, explicit: tuple[str, ...] = ()) -> TensorPlan | None:
        """What to write for ``name`` in the current step, or None if nothing."""
        if not self._active:
            return None
        key = (self._active, name, explicit)
        try:
            return self._plans[key]
        except KeyError:
            pass
        self.prepare()
        names = [n for n in self._members(name) if n in self._active]
        names += [n for n in explicit if n in self._active and n not in names and n in self._resolved]
        plan = self._build(name, names) if names else None
        self._plans[key] = plan
        return plan

    def _build(self, name: str, names: list[str]) -> TensorPlan | None:
        raw = shape = histogram = scalar = False
        ops: list[tuple[str, bool]] = []
        for n in names:
            r = self._resolved[n]
            raw = raw or r.reduction.save_raw_tensor
            shape = shape or r.reduction.save_shape
            histogram = histogram or r.histogram
            scalar = scalar or n in SCALAR_COLLECTIONS
            ops += [op for op in r.reduction.ops() if op not in ops]
            if r.coll.record_saved(name):
                self.names_changed = True
        if not (raw or shape or ops):
            return None
        return TensorPlan(raw, shape, tuple(ops), histogram, scalar, tuple(names))


__all__ = ["SavePolicy", "TensorPlan"]
