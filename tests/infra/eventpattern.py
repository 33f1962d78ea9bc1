"""An offline EventBridge event-pattern matcher for the tests (moto's cannot look inside arrays).

Follows aws/event-ruler, EventBridge's matching engine, for the parts our patterns use and a little more:
- a pattern is an object; every key in it must match (AND); ``"$or": [pattern, ...]`` matches when one does;
- a leaf is a list of matchers; the field matches when one event value equals one matcher: a string,
  number (compared as numbers) or null, or one of ``{"prefix"}``, ``{"suffix"}``, ``{"equals-ignore-case"}``,
  ``{"anything-but"}`` (a value, a list of values, or ``{"prefix"}``), ``{"exists": bool}``,
  ``{"numeric": [op, n, ...]}``;
- a scalar array in the event matches when any element matches;
- arrays of objects are "crushed": an object pattern under an array field matches when one element
  matches the whole object pattern (array-consistent: fields are checked on the same element).
Anything else raises ``UnsupportedPatternError`` rather than guessing.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

_MISSING = object()
_NUMERIC_OPS: dict[str, Callable[[float, float], bool]] = {
    "=": operator.eq,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class UnsupportedPatternError(ValueError):
    """The pattern uses syntax this matcher does not implement (or EventBridge rejects)."""


def matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Does ``event`` match ``pattern``, as EventBridge would decide?"""
    if not isinstance(pattern, Mapping):
        raise UnsupportedPatternError(f"a pattern is a JSON object, got {pattern!r}")
    return _object(pattern, event)


def _object(pattern: Mapping[str, Any], event: Any) -> bool:
    if isinstance(event, list):  # crushed array of objects: one element must match the whole object
        return any(_object(pattern, element) for element in _flatten(event))
    if not isinstance(event, Mapping):
        return False
    for key, sub in pattern.items():
        if key == "$or":
            if not isinstance(sub, list) or len(sub) < 2:
                raise UnsupportedPatternError(f"$or takes a list of at least two patterns, got {sub!r}")
            if not any(_object(alternative, event) for alternative in sub):
                return False
        elif isinstance(sub, Mapping):
            value = event.get(key, _MISSING)
            if value is _MISSING or not _object(sub, value):
                return False
        elif isinstance(sub, list):
            if not _leaf(sub, event.get(key, _MISSING), key):
                return False
        else:
            raise UnsupportedPatternError(f"{key}: a pattern value is an object or a list, got {sub!r}")
    return True


def _flatten(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        out.extend(_flatten(value) if isinstance(value, list) else [value])
    return out


def _leaf(matchers: list[Any], value: Any, key: str) -> bool:
    if not matchers:
        raise UnsupportedPatternError(f"{key}: an empty list matches nothing; EventBridge rejects it")
    if value is _MISSING:
        return any(isinstance(m, Mapping) and m.get("exists") is False for m in matchers)
    values = _flatten(value) if isinstance(value, list) else [value]
    if any(isinstance(v, Mapping) for v in values):
        # a leaf pattern against an object: only "exists": true can match it
        return any(isinstance(m, Mapping) and m.get("exists") is True for m in matchers)
    return any(_one(m, v, key) for m in matchers for v in values)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(expected: Any, value: Any) -> bool:
    if _is_number(expected) and _is_number(value):
        return float(expected) == float(value)
    return type(expected) is type(value) and expected == value


def _one(matcher: Any, value: Any, key: str) -> bool:
    if not isinstance(matcher, Mapping):
        return _equal(matcher, value)
    if len(matcher) != 1:
        raise UnsupportedPatternError(f"{key}: a matcher object has one key, got {matcher!r}")
    ((kind, arg),) = matcher.items()
    if kind == "exists":
        return bool(arg)  # the value is present (missing values are handled by the caller)
    if kind == "prefix":
        return isinstance(value, str) and value.startswith(_text(arg, key))
    if kind == "suffix":
        return isinstance(value, str) and value.endswith(_text(arg, key))
    if kind == "equals-ignore-case":
        return isinstance(value, str) and value.lower() == _text(arg, key).lower()
    if kind == "anything-but":
        if isinstance(arg, Mapping):
            if set(arg) != {"prefix"}:
                raise UnsupportedPatternError(
                    f"{key}: anything-but supports a value, a list or prefix: {arg!r}"
                )
            return not (isinstance(value, str) and value.startswith(_text(arg["prefix"], key)))
        excluded = arg if isinstance(arg, list) else [arg]
        return not any(_equal(e, value) for e in excluded)
    if kind == "numeric":
        return _numeric(arg, value, key)
    raise UnsupportedPatternError(f"{key}: matcher {kind!r} is not implemented here")


def _text(arg: Any, key: str) -> str:
    if not isinstance(arg, str):
        raise UnsupportedPatternError(f"{key}: expected a string argument, got {arg!r}")
    return arg


def _numeric(arg: Any, value: Any, key: str) -> bool:
    if not isinstance(arg, list) or len(arg) not in (2, 4):
        raise UnsupportedPatternError(f"{key}: numeric takes [op, n] or [op, n, op, n], got {arg!r}")
    if not _is_number(value):
        return False
    pairs = [(arg[i], arg[i + 1]) for i in range(0, len(arg), 2)]
    for op, bound in pairs:
        if op not in _NUMERIC_OPS or not _is_number(bound):
            raise UnsupportedPatternError(f"{key}: bad numeric comparison {op!r} {bound!r}")
    return all(_NUMERIC_OPS[op](float(value), float(bound)) for op, bound in pairs)
