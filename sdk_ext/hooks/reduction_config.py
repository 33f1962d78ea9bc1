"""What to save of a tensor: its raw value, its shape, and/or reductions of it.

``reductions`` and ``abs_reductions`` take ops from ``min, max, mean, std, variance, sum, prod``;
``norms`` and ``abs_norms`` take ``l1, l2`` (``l1_norm``/``l2_norm`` accepted). The config (csv)
spelling, used in SageMaker's HookParameters and in collections files, is
``"min,abs_mean,l2_norm,abs_l1_norm"``: plain reductions, then norms, then abs reductions, then abs
norms. Records are written in that same order, before the raw value.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.format.collection_file import ReductionSpec
from sdk_ext.format.paths import NORM_OPS, REDUCTION_OPS

_NORM_ALIASES = {"l1_norm": "l1", "l2_norm": "l2", "l1": "l1", "l2": "l2"}


def _ops(values: Iterable[str] | str | None, allowed: tuple[str, ...], what: str, problems: list[str]) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    out: list[str] = []
    for raw in values:
        if not isinstance(raw, str):
            problems.append(f"{what}: {raw!r} is not a string")
            continue
        op = raw.strip()
        if allowed is NORM_OPS:
            op = _NORM_ALIASES.get(op, op)
        if op not in allowed:
            problems.append(f"{what}: unknown op {raw!r}; use one of {', '.join(allowed)}")
        elif op not in out:
            out.append(op)
    return tuple(out)


def parse_bool(value: object, what: str) -> bool:
    """A JSON boolean or the strings ``true``/``false`` (any case); anything else raises ConfigError."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{what} must be true or false, got {value!r}", where="configuration")


@dataclass(frozen=True, slots=True, init=False)
class ReductionConfig:
    """Which reductions to save, and whether to save the raw tensor and its shape."""

    reductions: tuple[str, ...]
    abs_reductions: tuple[str, ...]
    norms: tuple[str, ...]
    abs_norms: tuple[str, ...]
    save_raw_tensor: bool
    save_shape: bool

    def __init__(
        self,
        reductions: Iterable[str] | str | None = None,
        abs_reductions: Iterable[str] | str | None = None,
        norms: Iterable[str] | str | None = None,
        abs_norms: Iterable[str] | str | None = None,
        save_raw_tensor: bool = False,
        save_shape: bool = False,
    ) -> None:
        problems: list[str] = []
        fields = {
            "reductions": _ops(reductions, REDUCTION_OPS, "reductions", problems),
            "abs_reductions": _ops(abs_reductions, REDUCTION_OPS, "abs_reductions", problems),
            "norms": _ops(norms, NORM_OPS, "norms", problems),
            "abs_norms": _ops(abs_norms, NORM_OPS, "abs_norms", problems),
        }
        for name, flag in (("save_raw_tensor", save_raw_tensor), ("save_shape", save_shape)):
            if not isinstance(flag, bool):
                problems.append(f"{name} must be True or False, got {flag!r}")
        if problems:
            raise ConfigError(problems, where="reduction config")
        for name, value in fields.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "save_raw_tensor", save_raw_tensor)
        object.__setattr__(self, "save_shape", save_shape)

    def ops(self) -> tuple[tuple[str, bool], ...]:
        """``(op, abs)`` pairs in write order; ``op`` as in tensor names (``mean``, ``l2``)."""
        return (
            tuple((op, False) for op in self.reductions)
            + tuple((op, False) for op in self.norms)
            + tuple((op, True) for op in self.abs_reductions)
            + tuple((op, True) for op in self.abs_norms)
        )

    def csv_names(self) -> tuple[str, ...]:
        """The config spelling, in order: ``mean``, ``l2_norm``, ``abs_max``, ``abs_l1_norm``."""
        return (
            self.reductions
            + tuple(f"{op}_norm" for op in self.norms)
            + tuple(f"abs_{op}" for op in self.abs_reductions)
            + tuple(f"abs_{op}_norm" for op in self.abs_norms)
        )

    def to_spec(self) -> ReductionSpec:
        return ReductionSpec(self.csv_names(), self.save_raw_tensor, self.save_shape)

    def to_json_dict(self) -> dict[str, Any]:
        return {"save_raw_tensor": self.save_raw_tensor, "reductions": ",".join(self.csv_names()),
                "save_shape": self.save_shape}

    def to_json(self) -> str:
        """The config as a JSON string (smdebug's ``to_json``); :meth:`from_json` reads it back."""
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_json(cls, text: str) -> ReductionConfig:
        """The config of a :meth:`to_json` string. Raises ConfigError if it is not one."""
        try:
            params = json.loads(text)
        except ValueError as err:
            raise ConfigError(f"not a reduction config JSON string: {err}", where="reduction config") from err
        if not isinstance(params, dict):
            raise ConfigError(f"a reduction config JSON string holds an object, got {params!r}", where="reduction config")
        return cls.from_dict(params)

    @classmethod
    def from_csv(cls, csv: str, *, save_raw_tensor: bool = False, save_shape: bool = False) -> ReductionConfig:
        """Parse the config spelling (``"min,abs_mean,l2_norm,abs_l1_norm"``)."""
        buckets: dict[str, list[str]] = {"reductions": [], "abs_reductions": [], "norms": [], "abs_norms": []}
        problems: list[str] = []
        for raw in csv.split(","):
            name = raw.strip()
            if not name:
                continue
            is_abs = name.startswith("abs_")
            base = name[4:] if is_abs else name
            if base in _NORM_ALIASES:
                buckets["abs_norms" if is_abs else "norms"].append(base)
            elif base in REDUCTION_OPS:
                buckets["abs_reductions" if is_abs else "reductions"].append(base)
            else:
                problems.append(
                    f"unknown reduction {name!r}; use {', '.join(REDUCTION_OPS)}, l1_norm, l2_norm, "
                    "each optionally prefixed with abs_"
                )
        if problems:
            raise ConfigError(problems, where="reductions")
        return cls(**buckets, save_raw_tensor=save_raw_tensor, save_shape=save_shape)

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> ReductionConfig:
        """From ``{"reductions": csv, "save_raw_tensor": bool, "save_shape": bool}`` (SageMaker's keys).

        ``save_raw_tensor`` defaults to False, as in smdebug: giving ``reductions`` means "only these".
        Booleans may be JSON booleans or the strings ``"true"``/``"false"``.
        """
        raw = parse_bool(params.get("save_raw_tensor", False), "save_raw_tensor")
        shape = parse_bool(params.get("save_shape", False), "save_shape")
        csv = params.get("reductions", "")
        if not isinstance(csv, str):
            raise ConfigError(f"reductions must be a csv string, got {csv!r}", where="reductions")
        return cls.from_csv(csv, save_raw_tensor=raw, save_shape=shape)


#: What a hook saves for a collection without its own reduction config, unless told otherwise.
RAW_ONLY = ReductionConfig(save_raw_tensor=True)

__all__ = ["RAW_ONLY", "ReductionConfig", "parse_bool"]
