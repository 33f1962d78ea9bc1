"""What the built-in tensor rules share: tensor selection and tolerant value lookups.

Conventions (docs/RULES.md#conventions-of-the-built-in-rules): a rule looks only at tensors that have data at the step it
is evaluating; a tensor missing at that step is skipped, never a reason to fire; selection is the
union of ``collection_names`` and ``tensor_regex`` (every tensor when both are empty, unless the rule
requires one of them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sdk_ext.exceptions import (
    InsufficientInformationForRuleInvocation,
    NoMoreData,
    StepNotYetAvailable,
    StepUnavailable,
    TensorUnavailable,
    TensorUnavailableForStep,
)
from sdk_ext.modes import ModeKeys
from sdk_ext.rules.params import ParamParser
from sdk_ext.rules.rule import Rule

logger = logging.getLogger(__name__)

#: Lookup failures that mean "this tensor has nothing for this step": skip it.
MISSING = (TensorUnavailableForStep, TensorUnavailable, StepUnavailable, StepNotYetAvailable, KeyError)


class BuiltinRule(Rule):
    """Base of the built-in rules: parameters are parsed with a :class:`ParamParser` (``self.params``).

    Subclasses parse every parameter in ``__init__`` through ``self.params`` and end with
    ``self.params.done()``, which raises one ConfigError naming each bad parameter and its value.

    Every selection goes through :meth:`select`, which remembers what was asked for and what matched,
    so that a rule which never matched a tensor says so (:meth:`coverage_note`) instead of passing.
    A rule that judges a tensor only once it has more than that step's value (a previous step, a
    window of steps, enough samples, the same tensor in another trial) sets
    :attr:`judges_on_selection` False, records what it judged with :meth:`judged` and says in
    :meth:`needs_to_judge` what it was missing: a rule that matched tensors but could judge none of them says
    that too, rather than passing.
    """

    #: False for rules that judge something other than tensors (StalledTrainingRule: time).
    selects_tensors = True
    #: For a rule with several separate checks: each check's name -> what it needs to evaluate anything.
    #: A check that never evaluated a tensor is named by :meth:`part_coverage_note` (``CheckedPartly``).
    parts: dict[str, str] = {}
    #: True when every tensor :meth:`select` returns is judged at that step (most rules); False when the
    #: rule calls :meth:`judged` itself (see the class docstring).
    judges_on_selection = True

    def __init__(self, base_trial: Any, other_trials: Sequence[Any] | None = None, action_str: str = "") -> None:
        super().__init__(base_trial, other_trials, action_str)
        self.params = ParamParser(self.rule_name)
        #: Names of the tensors this rule judged at some step (those it evaluated its condition on).
        self.checked: set[str] = set()
        #: Names of the tensors this rule selected at some step (judged or not).
        self.matched: set[str] = set()
        self._asked: dict[str, None] = {}  # the selections asked for, in first-asked order (for messages)
        #: Names of the tensors each of :attr:`parts` evaluated at some step.
        self.checked_parts: dict[str, set[str]] = {}

    def coverage_note(self) -> str | None:
        """None if the rule judged some tensor; else why it checked nothing, and what to change."""
        if not self.selects_tensors or self.checked:
            return None
        if self.matched:
            found = sorted(self.matched)
            sample = ", ".join(repr(n) for n in found[:6]) + (f" ... ({len(found)} in all)" if len(found) > 6 else "")
            return f"the rule found {sample} but could judge none of them: it needs {self.needs_to_judge()}"
        try:
            names = sorted(self.base_trial.tensor_names())
        except (*MISSING, NoMoreData):
            names = []
        asked = "; ".join(self._asked) or "any tensor"
        sample = ", ".join(names[:6]) + (f" ... ({len(names)} in all)" if len(names) > 6 else "")
        return (f"the rule matched no tensor ({asked}), so it evaluated nothing; the trial has "
                f"{'the tensors ' + sample if names else 'no tensors'}. Set tensor_regex or collection_names "
                "to tensors the job saves, or save the collection the rule needs")

    def needs_to_judge(self) -> str:
        """What a selected tensor must have before the rule can judge it, and how to get it (rules whose
        :attr:`judges_on_selection` is False say it)."""
        return "more steps of these tensors"

    def judged(self, names: Iterable[str]) -> None:
        """Record that the rule evaluated its condition on ``names`` (see :attr:`judges_on_selection`)."""
        self.checked.update(names)

    def checked_part(self, part: str, names: Iterable[str]) -> None:
        """Record that the check ``part`` (one of :attr:`parts`) evaluated the tensors ``names``."""
        if part not in self.parts:
            raise KeyError(f"{self.rule_name} has no check named {part!r}; its checks: {', '.join(self.parts)}")
        found = set(names)
        if found:
            self.checked_parts.setdefault(part, set()).update(found)
            self.checked.update(found)

    def part_coverage_note(self) -> str | None:
        """For a rule with several checks that looked at some tensor: which checks evaluated none, and
        what each needs. None when every check evaluated something (or the rule has one check)."""
        if not self.parts or not self.checked:
            return None
        missing = [p for p in self.parts if not self.checked_parts.get(p)]
        if not missing:
            return None
        done = [p for p in self.parts if p not in missing]
        gaps = "; ".join(f"the {p} check matched no tensor (it needs {self.parts[p]})" for p in missing)
        return f"{gaps}, so it evaluated nothing; only the {' and '.join(done)} check{'s' if len(done) > 1 else ''} ran"

    # --- selection ----------------------------------------------------------------------------

    def require_selection(self, collection_names: list[str], tensor_regex: list[str]) -> None:
        """The rule cannot guess what to look at: one of the two must be given."""
        if not collection_names and not tensor_regex:
            raise InsufficientInformationForRuleInvocation(
                self.rule_name, "set collection_names or tensor_regex (e.g. tensor_regex='.*relu_output')"
            )

    def select(
        self,
        step: int,
        *,
        collections: Iterable[str] = (),
        regex: Iterable[str] = (),
        all_if_empty: bool = True,
        trial: Any = None,
    ) -> list[str]:
        """Names of the selected tensors that have data at ``step`` (sorted)."""
        trial = self.base_trial if trial is None else trial
        collections, regex = list(collections), list(regex)
        self._asked.update({f"collection {c!r}": None for c in collections})
        self._asked.update({f"tensor_regex {r!r}": None for r in regex})
        names: set[str] = set()
        if collections:
            known = _collection_names(trial)
            for c in collections:
                if c in known:
                    names.update(trial.tensor_names(collection=c))
        if regex:
            names.update(trial.tensor_names(regex=regex))
        if not collections and not regex and all_if_empty:
            names.update(trial.tensor_names())
        found = sorted(names & set(tensor_names_at(trial, step)))
        self.matched.update(found)
        if self.judges_on_selection:
            self.checked.update(found)
        return found

    def collection_tensors(self, name: str, step: int, trial: Any = None) -> list[str]:
        """Tensors of collection ``name`` with data at ``step`` (empty if the collection does not exist)."""
        return self.select(step, collections=[name], all_if_empty=False, trial=trial)

    def loss_tensors(self, step: int, tensor_regex: list[str] | None = None) -> list[str]:
        """Loss tensors with data at ``step``: ``tensor_regex`` if given, else the ``losses`` collection,
        else every tensor whose name contains "loss" (any case)."""
        if tensor_regex:
            return self.select(step, regex=tensor_regex, all_if_empty=False)
        return self.collection_tensors("losses", step) or self.select(step, regex=["(?i)loss"], all_if_empty=False)

    # --- values -------------------------------------------------------------------------------

    def value(self, name: str, step: int, *, trial: Any = None, mode: ModeKeys = ModeKeys.GLOBAL) -> Any:
        """The value of ``name`` at ``step`` as a numpy array, or None if it has none there."""
        trial = self.base_trial if trial is None else trial
        try:
            return np.asarray(trial.tensor(name).value(step, mode=mode))
        except MISSING:
            return None

    def reduction(self, name: str, step: int, op: str, *, abs: bool = False) -> float | None:
        """A reduction of ``name`` at ``step`` (stored or computed by the trial), or None."""
        try:
            return float(self.base_trial.tensor(name).reduction_value(step, op, abs=abs))
        except MISSING:
            return None
        except (TypeError, ValueError):  # non-numeric tensor
            return None

    def tensor_steps(self, name: str, *, mode: ModeKeys = ModeKeys.GLOBAL, trial: Any = None) -> list[int]:
        trial = self.base_trial if trial is None else trial
        try:
            return sorted(trial.tensor(name).steps(mode=mode))
        except MISSING:
            return []

    def mode_of(self, step: int) -> tuple[ModeKeys, int]:
        """``(mode, mode step)`` of a global step (GLOBAL, step when the trial does not know it)."""
        try:
            mode, mode_step = self.base_trial.mode(step), self.base_trial.mode_step(step)
        except (*MISSING, ValueError, NoMoreData):
            return ModeKeys.GLOBAL, step
        if mode is None or mode_step is None:
            return ModeKeys.GLOBAL, step
        return ModeKeys.parse(mode), int(mode_step)


def tensor_names_at(trial: Any, step: int) -> list[str]:
    """Names of the tensors with data (value, reduction or shape) at global ``step``."""
    try:
        return list(trial.tensor_names(step=step))
    except MISSING:
        return []


def _collection_names(trial: Any) -> set[str]:
    collections = trial.collections()
    return set(collections.keys() if isinstance(collections, dict) else collections)


def is_numeric(value: np.ndarray) -> bool:
    return value.dtype.kind in "biufc" and value.size > 0


def as_scalar(value: np.ndarray | None) -> float | None:
    """A one-element numeric value as a float; None for anything else (RULES.md: "scalar-valued")."""
    if value is None or value.size != 1 or value.dtype.kind not in "biuf":
        return None
    return float(value.reshape(()))


def fmt(x: float) -> str:
    """A number for a message: short, but never rounding a small value to 0."""
    return f"{x:.4g}"


__all__ = ["MISSING", "BuiltinRule", "as_scalar", "fmt", "is_numeric", "tensor_names_at"]
