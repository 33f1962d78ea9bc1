"""``smdebug.analysis.utils``: ``no_refresh`` / ``refresh`` around a block of trial queries (see
:mod:`sdk_ext.trials.create`), and the parameter parsers custom rules use."""

from __future__ import annotations

from typing import Any

from sdk_ext.trials.create import no_refresh, refresh


def parse_list_from_str(arg: str | list[str] | None, delimiter: str = ",") -> list[str]:
    """A rule parameter given as a delimited string (or already a list) as a list of strings."""
    if arg is None or arg == "":
        return []
    if isinstance(arg, str):
        return arg.split(delimiter)
    return list(arg)


def parse_bool(arg: Any, default: bool) -> bool:
    """A rule parameter as a bool: True/False or "true"/"false" (either capitalisation); None is ``default``.

    Raises:
        ValueError: anything else (naming it).
    """
    if arg is None:
        return default
    if arg in (True, False):
        return bool(arg)
    if arg in ("True", "true"):
        return True
    if arg in ("False", "false"):
        return False
    raise ValueError(f"boolean argument expected, but found {arg!r}")


__all__ = ["no_refresh", "parse_bool", "parse_list_from_str", "refresh"]
