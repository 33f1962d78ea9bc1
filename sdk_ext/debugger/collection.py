"""CollectionConfig: which tensors the training hook saves, and how often.

Request form (one element of ``DebugHookConfig.CollectionConfigurations``)::

    {"CollectionName": "weights", "CollectionParameters": {"save_interval": "100"}}

``CollectionParameters`` is present whenever ``parameters is not None`` (so ``{}`` is sent as ``{}``);
values go out unchanged. Two configs are equal when name and parameters are equal; the hash ignores
whether parameters is None or ``{}`` (equal configs hash alike; ``None`` and ``{}`` are not equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdk_ext.debugger.errors import Problems, check_name, check_str_mapping


class CollectionConfig:
    """A named tensor collection and its save parameters.

    Args:
        name: The collection, e.g. ``"weights"``, ``"gradients"``, ``"losses"`` or your own.
        parameters: Save settings such as ``include_regex``, ``save_interval``, ``reductions``,
            ``save_histogram``, ``train.save_interval``, ``start_step``, ``end_step``.

    Raises:
        DebuggerConfigError: ``name`` is not a non-empty string, or ``parameters`` is not a dict
            with string keys.
    """

    __slots__ = ("name", "parameters")

    def __init__(self, name: str, parameters: Mapping[str, Any] | None = None) -> None:
        problems = Problems("CollectionConfig")
        check_name(problems, "name", name)
        params = check_str_mapping(problems, f"collection {name!r} parameters", parameters,
                                   string_values=False)
        problems.raise_if_any()
        self.name = name
        self.parameters = params

    def _to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"CollectionName": self.name}
        if self.parameters is not None:
            request["CollectionParameters"] = dict(self.parameters)
        return request

    @classmethod
    def from_request_dict(cls, data: Mapping[str, Any]) -> CollectionConfig:
        """The config a ``CollectionConfigurations`` element describes (the reverse of ``_to_request_dict``)."""
        return cls(data.get("CollectionName"), data.get("CollectionParameters"))  # type: ignore[arg-type]

    def _key(self) -> tuple[str, tuple[tuple[str, Any], ...]]:
        return self.name, tuple(sorted((self.parameters or {}).items()))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectionConfig):
            raise TypeError(
                "CollectionConfig is only comparable with other CollectionConfig objects. "
                f"Got a {type(other).__name__} ({other!r}); compare with CollectionConfig(name, parameters), "
                "or compare the .name attributes"
            )
        return self.name == other.name and self.parameters == other.parameters

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"CollectionConfig(name={self.name!r}, parameters={self.parameters!r})"
