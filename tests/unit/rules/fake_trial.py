"""An in-memory trial with smdebug's single-worker semantics, for unit tests of rules and invoke_rule.

Functional tests use real trials on disk (sdk_ext.trials.create_trial); this one exists so the
framework and each rule's decisions can be tested in milliseconds and without a writer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdk_ext.exceptions import (
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from sdk_ext.modes import ModeKeys, StepState


@dataclass
class FakeCollection:
    name: str
    include_regex: list[str] = field(default_factory=list)
    tensor_names: set[str] = field(default_factory=set)

    def matches(self, name: str) -> bool:
        return name in self.tensor_names or any(re.search(r, name) for r in self.include_regex)


class FakeTensor:
    def __init__(self, trial: FakeTrial, name: str) -> None:
        self.trial, self.name = trial, name

    def _global(self, step: int, mode: ModeKeys) -> int:
        if mode == ModeKeys.GLOBAL:
            return step
        for g, (m, ms) in self.trial.mode_of.items():
            if m == mode and ms == step:
                return g
        raise TensorUnavailableForStep(self.name, step, mode)

    def steps(self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        out = []
        for g in sorted(self.trial.data):
            if self.name in self.trial.data[g] or self.name in self.trial.reductions.get(g, {}):
                m, ms = self.trial.mode_of.get(g, (ModeKeys.GLOBAL, g))
                if mode == ModeKeys.GLOBAL:
                    out.append(g)
                elif m == mode:
                    out.append(ms)
        return out

    def value(self, step_num: int, mode: ModeKeys = ModeKeys.GLOBAL, worker: str | None = None) -> np.ndarray:
        g = self._global(step_num, mode)
        try:
            return np.asarray(self.trial.data[g][self.name])
        except KeyError:
            raise TensorUnavailableForStep(self.name, step_num, mode) from None

    def reduction_value(self, step_num: int, reduction_name: str, mode: ModeKeys = ModeKeys.GLOBAL,
                        worker: str | None = None, abs: bool = False) -> Any:
        g = self._global(step_num, mode)
        stored = self.trial.reductions.get(g, {}).get(self.name, {}).get((reduction_name, abs))
        if stored is not None:
            return stored
        v = self.value(step_num, mode).astype(np.float64)
        v = np.abs(v) if abs else v
        return {"mean": np.mean, "min": np.min, "max": np.max, "variance": np.var, "std": np.std,
                "sum": np.sum}[reduction_name](v)

    def prev_steps(self, step: int, n: int | None = None, mode: ModeKeys = ModeKeys.GLOBAL) -> list[int]:
        s = [x for x in self.steps(mode) if x <= step]
        return s[-n:] if n else s


class FakeTrial:
    """Steps are added with :meth:`add`; ``pending`` steps are released one per NOT_YET poll (a live writer)."""

    def __init__(self, collections: dict[str, Iterable[str]] | None = None, *, ended: bool = False) -> None:
        self.data: dict[int, dict[str, Any]] = {}
        self.reductions: dict[int, dict[str, dict[tuple[str, bool], float]]] = {}
        self.mode_of: dict[int, tuple[ModeKeys, int]] = {}
        self.ended = ended
        self.dynamic_refresh = True
        self.colls = {name: FakeCollection(name, list(regexes)) for name, regexes in (collections or {}).items()}
        self.pending: list[Callable[[], None]] = []
        self.polls = 0

    # --- building ---
    def add(self, step: int, values: dict[str, Any], *, mode: ModeKeys = ModeKeys.GLOBAL,
            mode_step: int | None = None) -> FakeTrial:
        self.data.setdefault(step, {}).update({k: np.asarray(v) for k, v in values.items()})
        if mode != ModeKeys.GLOBAL:
            self.mode_of[step] = (mode, step if mode_step is None else mode_step)
        return self

    def add_reduction(self, step: int, name: str, op: str, value: float, *, abs: bool = False) -> FakeTrial:
        self.reductions.setdefault(step, {}).setdefault(name, {})[(op, abs)] = value
        self.data.setdefault(step, {})
        return self

    def end(self) -> FakeTrial:
        self.ended = True
        return self

    # --- trial API ---
    def _names(self) -> set[str]:
        names: set[str] = set()
        for g in self.data:
            names |= set(self.data[g]) | set(self.reductions.get(g, {}))
        return names

    def tensor_names(self, show_prefixed_tensors: bool = False, *, step: int | None = None,
                     mode: ModeKeys = ModeKeys.GLOBAL, regex: Any = None, collection: Any = None) -> list[str]:
        if step is not None:
            names = set(self.data.get(step, {})) | set(self.reductions.get(step, {}))
        else:
            names = self._names()
        if collection is not None:
            coll = self.colls.get(collection) or FakeCollection(collection)
            return sorted(n for n in names if coll.matches(n))
        if regex is not None:
            patterns = [regex] if isinstance(regex, str) else list(regex)
            return sorted(n for n in names if any(re.search(p, n) for p in patterns))
        return sorted(names)

    def has_tensor(self, tname: str) -> bool:
        return tname in self._names()

    def tensor(self, tname: str) -> FakeTensor:
        if not self.has_tensor(tname):
            raise TensorUnavailable(tname)
        return FakeTensor(self, tname)

    def steps(self, mode: ModeKeys = ModeKeys.GLOBAL, show_incomplete_steps: bool = False) -> list[int]:
        if mode == ModeKeys.GLOBAL:
            return sorted(self.data)
        return sorted(ms for g, (m, ms) in self.mode_of.items() if m == mode)

    def mode(self, global_step: int) -> ModeKeys | None:
        return self.mode_of.get(global_step, (ModeKeys.GLOBAL, global_step))[0] if global_step in self.data else None

    def mode_step(self, global_step: int) -> int | None:
        return self.mode_of.get(global_step, (ModeKeys.GLOBAL, global_step))[1] if global_step in self.data else None

    def collections(self) -> dict[str, FakeCollection]:
        return dict(self.colls)

    def has_passed_step(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> StepState:
        known = self.steps()
        if step in known:
            return StepState.AVAILABLE
        if any(s > step for s in known):
            return StepState.UNAVAILABLE
        if self.ended:
            return StepState.UNAVAILABLE
        self.polls += 1
        if self.pending:  # the "writer" produces the next step while we wait
            self.pending.pop(0)()
        return StepState.NOT_YET_AVAILABLE

    def wait_for_steps(self, required_steps: Sequence[int], mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        for step in required_steps:
            state = self.has_passed_step(step, mode)
            if state == StepState.UNAVAILABLE:
                known = self.steps()
                if known and step < known[-1]:
                    raise StepUnavailable(step, mode)
                raise NoMoreData(step, mode, known[-1] if known else -1)
            if state == StepState.NOT_YET_AVAILABLE:
                raise StepNotYetAvailable(step, mode)
