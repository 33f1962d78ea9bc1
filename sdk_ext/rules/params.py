"""Rule parameters: SageMaker sends every one as a string; rules parse them here.

``RuleParameters`` is a ``map<string,string>``, so a rule receives ``"1e-7"``, ``"True"`` or
``"gradients, weights"``. Python callers may pass native values (``1e-7``, ``True``, a list); both are
accepted. A :class:`ParamParser` collects every problem and raises one
:class:`~sdk_ext.exceptions.ConfigError` naming each parameter and the value it got::

    p = ParamParser("VanishingGradient")
    self.threshold = p.number("threshold", threshold, gt=0)
    p.done()
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from sdk_ext.exceptions import ConfigError
from sdk_ext.modes import ModeKeys

_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}
_NONE = {"", "none", "null"}


def is_unset(value: object) -> bool:
    """True for None and the strings SageMaker users write for "not set" (``""``, ``"None"``, ``"null"``)."""
    return value is None or (isinstance(value, str) and value.strip().lower() in _NONE)


class ParamParser:
    """Parses the parameters of one rule, collecting every problem before raising."""

    def __init__(self, rule_name: str) -> None:
        self.rule_name = rule_name
        self.problems: list[str] = []

    def _bad(self, name: str, value: object, expected: str) -> None:
        self.problems.append(f"parameter {name}={value!r}: {expected}")

    def done(self) -> None:
        """Raise one ConfigError listing every problem found so far (does nothing if there is none)."""
        if self.problems:
            raise ConfigError(self.problems, where=f"parameters of rule {self.rule_name}")

    def require(self, condition: bool, message: str) -> None:
        """Record ``message`` as a problem unless ``condition`` holds (for checks across parameters)."""
        if not condition:
            self.problems.append(message)

    def number(
        self,
        name: str,
        value: object,
        *,
        gt: float | None = None,
        ge: float | None = None,
        le: float | None = None,
    ) -> float:
        """A finite float (``"1e-7"``, ``0.5``)."""
        number = _to_float(value)
        if number is None or not math.isfinite(number):
            self._bad(name, value, "expected a finite number, e.g. '0.5' or '1e-7'")
            return math.nan
        self._check_range(name, value, number, gt=gt, ge=ge, le=le)
        return number

    def integer(
        self,
        name: str,
        value: object,
        *,
        ge: int | None = None,
        gt: int | None = None,
    ) -> int:
        """An integer (``"10"``, ``"10.0"``, ``10``)."""
        number = _to_float(value)
        if number is None or not math.isfinite(number) or number != int(number):
            self._bad(name, value, "expected a whole number, e.g. '10'")
            return 0
        self._check_range(name, value, number, gt=gt, ge=ge, le=None)
        return int(number)

    def maybe_number(self, name: str, value: object, *, gt: float | None = None,
                     ge: float | None = None) -> float | None:
        """Like :meth:`number`, but None when unset (None, ``""``, ``"None"``)."""
        return None if is_unset(value) else self.number(name, value, gt=gt, ge=ge)

    def maybe_integer(self, name: str, value: object, *, ge: int | None = None,
                      gt: int | None = None) -> int | None:
        """Like :meth:`integer`, but None when unset."""
        return None if is_unset(value) else self.integer(name, value, ge=ge, gt=gt)

    def flag(self, name: str, value: object) -> bool:
        """``True``/``"true"``/``"1"``/``"yes"`` or ``False``/``"false"``/``"0"``/``"no"`` (any case)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE:
            return True
        if isinstance(value, str) and value.strip().lower() in _FALSE:
            return False
        self._bad(name, value, "expected 'True' or 'False'")
        return False

    def strings(self, name: str, value: object) -> list[str]:
        """A comma-separated string (``"a, b"``; blanks stripped, empties dropped) or a list of strings."""
        if is_unset(value):
            return []
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, Iterable) and all(isinstance(v, str) for v in value):
            return [v.strip() for v in value if v.strip()]
        self._bad(name, value, "expected a comma-separated string such as 'gradients,weights'")
        return []

    def numbers(self, name: str, value: object) -> list[float]:
        """Comma-separated numbers (``"10, 90"``) or a list of numbers."""
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, Iterable):
            self._bad(name, value, "expected comma-separated numbers such as '10,90'")
            return []
        numbers = [_to_float(v) for v in items]
        if not numbers or any(n is None or not math.isfinite(n) for n in numbers):
            self._bad(name, value, "expected comma-separated numbers such as '10,90'")
            return []
        return [float(n) for n in numbers if n is not None]

    def integers(self, name: str, value: object) -> list[int]:
        """Comma-separated whole numbers (``"0, 3"``) or a list of ints."""
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, Iterable):
            self._bad(name, value, "expected comma-separated whole numbers such as '0,3'")
            return []
        numbers = [_to_float(v) for v in items]
        if not numbers or any(n is None or not math.isfinite(n) or n != int(n) for n in numbers):
            self._bad(name, value, "expected comma-separated whole numbers such as '0,3'")
            return []
        return [int(n) for n in numbers if n is not None]

    def text(self, name: str, value: object) -> str:
        """A non-empty string, surrounding blanks stripped."""
        if not isinstance(value, str) or not value.strip():
            self._bad(name, value, "expected a non-empty string")
            return ""
        return value.strip()

    def maybe_text(self, name: str, value: object) -> str | None:
        """Like :meth:`text`, but None when unset."""
        return None if is_unset(value) else self.text(name, value)

    def regex(self, name: str, value: object) -> str | None:
        """A regular expression (checked to compile), or None when unset."""
        text = self.maybe_text(name, value)
        if text:
            try:
                re.compile(text)
            except re.error as err:
                self._bad(name, value, f"not a valid regular expression ({err})")
                return None
        return text

    def regexes(self, name: str, value: object) -> list[str]:
        """Comma-separated regular expressions, each checked to compile."""
        patterns = self.strings(name, value)
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                self._bad(name, value, f"{pattern!r} is not a valid regular expression ({err})")
        return patterns

    def mode(self, name: str, value: object) -> ModeKeys | None:
        """A mode name (``"TRAIN"``, ``"eval"``, ``"ModeKeys.TRAIN"``) or None when unset."""
        if is_unset(value):
            return None
        text = value.split(".")[-1] if isinstance(value, str) else value
        try:
            return ModeKeys.parse(text)  # type: ignore[arg-type]
        except ValueError:
            self._bad(name, value, "expected one of TRAIN, EVAL, PREDICT, GLOBAL")
            return None

    def _check_range(
        self, name: str, raw: object, number: float, *, gt: float | None, ge: float | None, le: float | None
    ) -> None:
        if gt is not None and not number > gt:
            self._bad(name, raw, f"must be greater than {gt:g}")
        if ge is not None and not number >= ge:
            self._bad(name, raw, f"must be at least {ge:g}")
        if le is not None and not number <= le:
            self._bad(name, raw, f"must be at most {le:g}")


def _to_float(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    try:
        return float(value)  # type: ignore[arg-type]  # numpy scalars
    except (TypeError, ValueError):
        return None


__all__ = ["ParamParser", "is_unset"]
