"""The one error type of :mod:`sdk_ext.debugger`, and the small checks every config class shares.

A configuration is checked as a whole: each constructor and :func:`~sdk_ext.debugger.apply_debugger`
collect every problem they find and raise one :class:`DebuggerConfigError` listing them all, so a
single round of fixes is enough. Nothing has been uploaded or sent when it is raised.

The SageMaker SDK raised ``ValueError``, ``RuntimeError``, ``TypeError`` or ``AssertionError`` for
these checks (the asserts vanish under ``python -O``). ``DebuggerConfigError`` derives from all four,
so ``except`` clauses written against the SDK still catch it after the import prefix changes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sdk_ext.exceptions import ConfigError

_S3_URI = re.compile(r"^s3://[^/\s]+(/.*)?$")


class DebuggerConfigError(ConfigError, TypeError, RuntimeError, AssertionError):
    """Invalid Debugger configuration; ``problems`` holds every problem found."""


class Problems:
    """Collects problems found while checking one call; :meth:`raise_if_any` reports them all."""

    __slots__ = ("items", "where")

    def __init__(self, where: str) -> None:
        self.where = where
        self.items: list[str] = []

    def add(self, message: str) -> None:
        self.items.append(message)

    def extend(self, other: Problems) -> None:
        self.items.extend(other.items)

    def add_all(self, messages: list[str]) -> None:
        self.items.extend(messages)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise DebuggerConfigError(self.items, where=self.where)


def is_s3_uri(value: object) -> bool:
    """True for ``s3://bucket`` or ``s3://bucket/key...``."""
    return isinstance(value, str) and _S3_URI.match(value) is not None


def check_s3_uri(problems: Problems, what: str, value: object, *, optional: bool = True) -> None:
    """Add a problem unless ``value`` is an ``s3://`` URI (or None when ``optional``)."""
    if value is None and optional:
        return
    if not is_s3_uri(value):
        problems.add(
            f"{what} must be an S3 URI like 's3://bucket/prefix', got {value!r}; SageMaker reads "
            "and writes Debugger data only in S3"
        )


def check_optional_str(problems: Problems, what: str, value: object) -> None:
    if value is not None and not isinstance(value, str):
        problems.add(f"{what} must be a string, got {type(value).__name__} {value!r}")


def check_name(problems: Problems, what: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        problems.add(f"{what} must be a non-empty string, got {value!r}")


def check_str_mapping(
    problems: Problems, what: str, value: object, *, string_values: bool
) -> dict[str, Any] | None:
    """Check ``value`` is a mapping with str keys (and str values if asked); return a copy."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        problems.add(f"{what} must be a dict, got {type(value).__name__} {value!r}")
        return None
    for key, item in value.items():
        if not isinstance(key, str):
            problems.add(f"{what} key {key!r} must be a string")
        elif string_values and not isinstance(item, str):
            problems.add(
                f"{what}[{key!r}] must be a string, got {type(item).__name__} {item!r}; SageMaker "
                f"accepts only string parameters, write it as {str(item)!r}"
            )
    return dict(value)
