"""Collections as a trial shows them, with smdebug's attribute names.

A custom rule written against smdebug reads ``trial.collection("weights").tensor_names`` (a set)
and ``.include_regex`` (a list); those keep their types here. An analysis may widen a collection
with ``include(regex)`` and ``add_tensor_name(name)`` as in smdebug: the trial's queries see the
change, the collections file does not. ``reduction_config`` and
``save_config`` are the format's frozen specs (:class:`~sdk_ext.format.ReductionSpec`, a dict of
:class:`~sdk_ext.format.SaveSpec` by mode) rather than smdebug's mutable config objects.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.format.collection_file import CollectionSpec, ReductionSpec, SaveSpec, collection_to_dict
from sdk_ext.modes import ModeKeys


class Collection:
    """One collection of the trial's collections file."""

    __slots__ = ("_names", "_regex", "_spec")

    def __init__(self, spec: CollectionSpec) -> None:
        self._spec = spec
        self._regex: list[re.Pattern[str]] | None = None
        self._names: frozenset[str] | None = None  # spec.tensor_names as a set, made at the first match

    @classmethod
    def empty(cls, name: str) -> Collection:
        """What smdebug hands out for a name the trial does not define: no tensors, no regex."""
        return cls(CollectionSpec(name=name))

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def include_regex(self) -> list[str]:
        return list(self._spec.include_regex)

    @property
    def tensor_names(self) -> set[str]:
        return set(self._spec.tensor_names)

    @property
    def reduction_config(self) -> ReductionSpec | None:
        return self._spec.reduction

    @property
    def save_config(self) -> dict[ModeKeys, SaveSpec] | None:
        return None if self._spec.save is None else dict(self._spec.save)

    @property
    def save_histogram(self) -> bool:
        return self._spec.save_histogram

    @property
    def spec(self) -> CollectionSpec:
        return self._spec

    def include(self, regex: str | Iterable[str]) -> None:
        """Also match tensors found by ``regex`` (a pattern or a list of them), as smdebug's ``include``.

        Raises:
            ConfigError: a pattern is not a valid regular expression (nothing is added then).
        """
        patterns = [regex] if isinstance(regex, str) else list(regex)
        problems = []
        for pattern in patterns:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as err:
                problems.append(f"include({pattern!r}): not a regular expression ({err}); escape it with re.escape()")
        if problems:
            raise ConfigError(problems, where=f"collection {self.name!r}")
        new = tuple(p for p in patterns if p not in self._spec.include_regex)
        self._spec = dataclasses.replace(self._spec, include_regex=self._spec.include_regex + new)
        self._regex = None

    def add_tensor_name(self, name: str) -> None:
        """Also hold the tensor ``name`` (whether or not it was saved), as smdebug's ``add_tensor_name``."""
        if name not in self._spec.tensor_names:
            self._spec = dataclasses.replace(self._spec, tensor_names=(*self._spec.tensor_names, name))
            self._names = None

    def matches(self, tensor_name: str) -> bool:
        """Whether a saved tensor belongs here: listed by name, or found by one of the regexes."""
        if self._names is None:  # a tuple scan per name made a rule's step over N gradients cost N^2
            self._names = frozenset(self._spec.tensor_names)
        if tensor_name in self._names:
            return True
        if self._regex is None:
            self._regex = [re.compile(r) for r in self._spec.include_regex]
        return any(r.search(tensor_name) for r in self._regex)

    def to_json_dict(self) -> dict[str, Any]:
        """The collection as its collections file stores it (smdebug's ``Collection.to_json_dict``)."""
        return collection_to_dict(self._spec)

    def __repr__(self) -> str:
        return f"<Collection {self.name!r}: {len(self._spec.tensor_names)} names, regex {list(self._spec.include_regex)}>"


__all__ = ["Collection"]
