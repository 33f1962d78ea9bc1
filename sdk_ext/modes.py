"""Training modes and step states, numbered as smdebug numbers them on disk.

The integer values are part of the format: event records store ``str(mode.value)`` and
index files store ``mode.name``.
"""

from __future__ import annotations

from enum import Enum


class ModeKeys(Enum):
    """The mode a step was taken in. ``GLOBAL`` means "no mode was set"."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4

    # Members are singletons compared by identity, so the identity hash is a valid one; Enum's own
    # (a Python-level hash of the name) costs ~0.3 us per dict lookup keyed by a mode.
    __hash__ = object.__hash__

    @classmethod
    def parse(cls, value: ModeKeys | str | int) -> ModeKeys:
        """Accept a ModeKeys, its name (any case, surrounding blanks ignored) or its number.

        Raises:
            ValueError: the value names no mode; the message lists the valid ones.
        """
        if isinstance(value, ModeKeys):
            return value
        if isinstance(value, str):
            key = value.strip().upper()
            if key in cls.__members__:
                return cls[key]
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        names = ", ".join(cls.__members__)
        raise ValueError(f"unknown mode {value!r}: use one of {names} (or 1-4)")


ALL_MODES: tuple[ModeKeys, ...] = (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT, ModeKeys.GLOBAL)

# smdebug exports ModeKeys itself as ``smdebug.modes``, so code written for it says ``modes.TRAIN``:
# with these, ``from sdk_ext import modes`` (and ``sdk_ext.pytorch.modes``) answer the same.
TRAIN = ModeKeys.TRAIN
EVAL = ModeKeys.EVAL
PREDICT = ModeKeys.PREDICT
GLOBAL = ModeKeys.GLOBAL


class StepState(Enum):
    """Answer of ``Trial.has_passed_step``."""

    UNAVAILABLE = 0
    AVAILABLE = 1
    NOT_YET_AVAILABLE = 2


__all__ = ["ALL_MODES", "EVAL", "GLOBAL", "PREDICT", "TRAIN", "ModeKeys", "StepState"]
