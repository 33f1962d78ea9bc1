"""RequiredTensors: what a rule declares in ``set_required_tensors`` to have fetched before it runs.

The same calls as smdebug's ``self.req_tensors.add(name, steps, trial=None, should_match_regex=False)``,
``get()``, ``get_names()``, ``get_tensor_steps(name)``, ``fetch()``, ``clear()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sdk_ext.exceptions import TensorUnavailable


class _ForTrial:
    def __init__(self, trial: Any) -> None:
        self.trial = trial
        self.steps: dict[str, list[int]] = {}
        self.tensors: dict[str, Any] = {}

    def add(self, name: str, steps: Iterable[int], *, should_match_regex: bool) -> None:
        if should_match_regex:
            names = self.trial.tensor_names(regex=[name])
        elif self.trial.has_tensor(name):
            names = [name]
        else:
            raise TensorUnavailable(name)
        for n in names:
            self.steps.setdefault(n, []).extend(steps)
            if n not in self.tensors:
                self.tensors[n] = self.trial.tensor(n)

    def fetch(self) -> None:
        wanted = sorted({s for steps in self.steps.values() for s in steps})
        if wanted:
            self.trial.wait_for_steps(wanted)
        for name, steps in self.steps.items():
            for step in steps:
                self.tensors[name].value(step)  # raises TensorUnavailableForStep if it is missing


class RequiredTensors:
    """Tensors (and steps) a rule needs at the current step, per trial."""

    def __init__(self, base_trial: Any, other_trials: Sequence[Any] | None = None) -> None:
        self.base_trial = base_trial
        self._per_trial: dict[int, _ForTrial] = {id(base_trial): _ForTrial(base_trial)}
        for trial in other_trials or ():
            self._per_trial.setdefault(id(trial), _ForTrial(trial))

    def _of(self, trial: Any) -> _ForTrial:
        return self._per_trial[id(trial if trial is not None else self.base_trial)]

    def add(self, name: str, steps: Iterable[int], trial: Any = None, should_match_regex: bool = False) -> None:
        """Require ``name`` (a regex when ``should_match_regex``) at ``steps`` of ``trial`` (default base).

        Raises:
            TensorUnavailable: ``name`` is not a regex and the trial has no such tensor.
        """
        self._of(trial).add(name, list(steps), should_match_regex=should_match_regex)

    def get_tensor_steps(self, name: str, trial: Any = None) -> list[int]:
        return self._of(trial).steps[name]

    def get_names(self, trial: Any = None) -> list[str]:
        return list(self._of(trial).steps)

    def get(self, trial: Any = None) -> list[Any]:
        """The tensor objects required from ``trial``."""
        return list(self._of(trial).tensors.values())

    def clear(self) -> None:
        for per in self._per_trial.values():
            per.steps.clear()
            per.tensors.clear()

    def fetch(self) -> None:
        """Wait for every required step and read every value once (errors surface here, before the rule)."""
        for per in self._per_trial.values():
            per.fetch()


__all__ = ["RequiredTensors"]
