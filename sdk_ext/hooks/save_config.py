"""When to save: ``SaveConfigMode`` (one mode) and ``SaveConfig`` (all four modes).

A step ``s`` (the step count *within the current mode*) is saved when ``s`` is in ``save_steps``, or
when ``start_step <= s < end_step`` (no end when ``end_step`` is None) and ``s % save_interval == 0``.
The interval counts from step 0, not from ``start_step`` (start 5, interval 10 saves 10, 20, ...), as
in smdebug, and ``save_steps`` adds to the interval schedule.

Differences from smdebug: a ``SaveConfig`` given for some modes only never fails at run time; a mode
it leaves out falls back to the hook's config (for a collection) or to the defaults (for the hook).
Bad values (interval < 1, negative steps, end before start) raise :class:`ConfigError` at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.format.collection_file import SaveSpec
from sdk_ext.modes import ALL_MODES, ModeKeys

DEFAULT_SAVE_INTERVAL = 500


def _as_int(value: object, what: str, problems: list[str]) -> int | None:
    """``value`` as an int (numeric strings accepted: SageMaker passes every parameter as a string)."""
    if isinstance(value, bool):
        problems.append(f"{what} must be an integer, got {value!r}")
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    problems.append(f"{what} must be an integer, got {value!r}")
    return None


def parse_steps(value: object, what: str = "save_steps") -> tuple[int, ...]:
    """``save_steps`` from a list of ints or a csv string (``"1,2,3"``).

    Raises:
        ConfigError: an item is not a non-negative integer.
    """
    problems: list[str] = []
    if value is None:
        return ()
    items: Iterable[object]
    if isinstance(value, str):
        items = [v for v in value.split(",") if v.strip()]
    elif isinstance(value, Iterable):
        items = value
    else:
        raise ConfigError(f"{what} must be a list of integers or a csv string, got {value!r}", where="save config")
    steps = []
    for item in items:
        step = _as_int(item, f"{what} item", problems)
        if step is not None:
            if step < 0:
                problems.append(f"{what} item must be >= 0, got {step}")
            steps.append(step)
    if problems:
        raise ConfigError(problems, where="save config")
    return tuple(steps)


@dataclass(frozen=True, slots=True, init=False)
class SaveConfigMode:
    """When to save in one mode. Unset arguments take the defaults (every 500 steps from step 0)."""

    save_interval: int
    start_step: int
    end_step: int | None
    save_steps: tuple[int, ...]
    _steps: frozenset[int] = field(repr=False, compare=False)

    def __init__(
        self,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int] | str | None = None,
    ) -> None:
        problems: list[str] = []
        interval = DEFAULT_SAVE_INTERVAL if save_interval is None else _as_int(save_interval, "save_interval", problems)
        start = 0 if start_step is None else _as_int(start_step, "start_step", problems)
        end = None if end_step is None else _as_int(end_step, "end_step", problems)
        try:
            steps = parse_steps(save_steps)
        except ConfigError as err:
            problems += err.problems
            steps = ()
        if interval is not None and interval < 1:
            problems.append(f"save_interval must be a positive integer, got {interval} (use 1 to save every step)")
        if start is not None and start < 0:
            problems.append(f"start_step must be >= 0, got {start}")
        if end is not None and end < 0:
            problems.append(f"end_step must be >= 0, got {end}")
        if start is not None and end is not None and 0 <= end < start:
            problems.append(f"end_step ({end}) is before start_step ({start}); nothing would be saved")
        if problems:
            raise ConfigError(problems, where="save config")
        object.__setattr__(self, "save_interval", interval)
        object.__setattr__(self, "start_step", start)
        object.__setattr__(self, "end_step", end)
        object.__setattr__(self, "save_steps", steps)
        object.__setattr__(self, "_steps", frozenset(steps))

    def should_save_step(self, step: int) -> bool:
        """Whether mode step ``step`` is saved."""
        if step in self._steps:
            return True
        if step < self.start_step or (self.end_step is not None and step >= self.end_step):
            return False
        return step % self.save_interval == 0

    def next_step_after(self, step: int) -> int | None:
        """The first saved step after ``step``, or None if there is none."""
        later = [s for s in self._steps if s > step]
        first = max(step + 1, self.start_step)
        first += -first % self.save_interval
        if self.end_step is None or first < self.end_step:
            later.append(first)
        return min(later) if later else None

    def to_spec(self) -> SaveSpec:
        return SaveSpec(self.save_interval, self.save_steps, self.start_step, self.end_step)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "save_interval": self.save_interval,
            "save_steps": list(self.save_steps),
            "start_step": self.start_step,
            "end_step": self.end_step,
        }

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> SaveConfigMode:
        """From ``{"save_interval", "start_step", "end_step", "save_steps"}`` (values may be strings)."""
        unknown = set(params) - {"save_interval", "start_step", "end_step", "save_steps"}
        if unknown:
            raise ConfigError(
                f"unknown save config keys {sorted(unknown)}; use save_interval, start_step, end_step, save_steps",
                where="save config",
            )
        return cls(
            save_interval=params.get("save_interval"),
            start_step=params.get("start_step"),
            end_step=params.get("end_step"),
            save_steps=params.get("save_steps"),
        )


class SaveConfig:
    """One :class:`SaveConfigMode` per mode.

    Either give mode-less values (``SaveConfig(save_interval=10)`` applies to every mode) or a
    ``mode_save_configs`` mapping (keys ModeKeys or their names; values SaveConfigMode, dicts, or
    None). Modes left out are "unset": see :meth:`merged_with`.
    """

    __slots__ = ("_modes",)

    def __init__(
        self,
        mode_save_configs: Mapping[ModeKeys | str, SaveConfigMode | Mapping[str, Any] | None] | None = None,
        save_interval: int | str | None = None,
        start_step: int | str | None = None,
        end_step: int | str | None = None,
        save_steps: Iterable[int] | str | None = None,
    ) -> None:
        modes: dict[ModeKeys, SaveConfigMode | None] = {}
        if mode_save_configs is None:
            same = SaveConfigMode(save_interval, start_step, end_step, save_steps)
            modes = {mode: same for mode in ALL_MODES}
        else:
            if any(v is not None for v in (save_interval, start_step, end_step, save_steps)):
                raise ConfigError(
                    "give either mode_save_configs or save_interval/start_step/end_step/save_steps, not both",
                    where="SaveConfig",
                )
            problems: list[str] = []
            for key, value in mode_save_configs.items():
                try:
                    mode = ModeKeys.parse(key)
                except ValueError as err:
                    problems.append(str(err))
                    continue
                if value is None or isinstance(value, SaveConfigMode):
                    modes[mode] = value
                elif isinstance(value, Mapping):
                    modes[mode] = SaveConfigMode.from_dict(value)
                else:
                    problems.append(f"mode {mode.name}: expected a SaveConfigMode or dict, got {value!r}")
            if problems:
                raise ConfigError(problems, where="SaveConfig")
        self._modes = {mode: modes.get(mode) for mode in ALL_MODES}

    @classmethod
    def parse(cls, obj: SaveConfig | SaveConfigMode | Mapping[Any, Any] | int | None) -> SaveConfig:
        """Accept what smdebug's hooks accept: None, SaveConfig, SaveConfigMode, a mode dict, an interval."""
        if obj is None:
            return cls()
        if isinstance(obj, SaveConfig):
            return obj
        if isinstance(obj, SaveConfigMode):
            return cls({mode: obj for mode in ALL_MODES})
        if isinstance(obj, Mapping):
            return cls(obj)
        if isinstance(obj, int) and not isinstance(obj, bool):
            return cls(save_interval=obj)
        raise ConfigError(
            f"save_config must be a SaveConfig, SaveConfigMode, dict of modes or an interval, got {obj!r}",
            where="save config",
        )

    def get_save_config(self, mode: ModeKeys) -> SaveConfigMode:
        """The config for ``mode``; the defaults if this config leaves ``mode`` unset."""
        return self._modes[mode] or SaveConfigMode()

    def is_set(self, mode: ModeKeys) -> bool:
        return self._modes[mode] is not None

    def should_save_step(self, mode: ModeKeys, step: int) -> bool:
        return self.get_save_config(mode).should_save_step(step)

    def merged_with(self, default: SaveConfig) -> SaveConfig:
        """A complete config: this config's modes, with unset ones taken from ``default``."""
        return SaveConfig({m: self._modes[m] or default.get_save_config(m) for m in ALL_MODES})

    def complete(self) -> SaveConfig:
        """A config with every mode set (unset modes get the defaults)."""
        return SaveConfig({m: self.get_save_config(m) for m in ALL_MODES})

    def to_spec(self) -> dict[ModeKeys, SaveSpec]:
        return {m: self.get_save_config(m).to_spec() for m in ALL_MODES}

    @property
    def mode_save_configs(self) -> dict[ModeKeys, SaveConfigMode | None]:
        """Mode -> its SaveConfigMode, None for a mode this config leaves unset (smdebug's attribute; a copy)."""
        return dict(self._modes)

    @classmethod
    def from_save_config_mode(cls, save_config_mode: SaveConfigMode) -> SaveConfig:
        """The same SaveConfigMode for every mode."""
        return cls({mode: save_config_mode for mode in ALL_MODES})

    def to_json_dict(self) -> dict[str, Any]:
        """Mode name -> its values, None for an unset mode (smdebug's layout)."""
        return {m.name: None if v is None else v.to_json_dict() for m, v in self._modes.items()}

    def to_json(self) -> str:
        """The config as a JSON string (smdebug's ``to_json``); see :meth:`from_json`."""
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_dict(cls, params: Mapping[Any, Any]) -> SaveConfig:
        """From mode names (or ModeKeys) -> SaveConfigMode, values dict or None (smdebug's ``from_dict``).

        Raises:
            ConfigError: not such a mapping; every problem is named.
        """
        if not isinstance(params, Mapping):
            raise ConfigError(f"a save config dict maps modes to their values, got {params!r}", where="save config")
        return cls(dict(params))

    @classmethod
    def from_json(cls, text: str) -> SaveConfig:
        """The config of a :meth:`to_json` string. Raises ConfigError if it is not one."""
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise ConfigError(f"not a save config JSON string: {err}", where="save config") from err
        if not isinstance(doc, dict) or not all(v is None or isinstance(v, dict) for v in doc.values()):
            raise ConfigError(f"a save config JSON string maps mode names to objects, got {doc!r}", where="save config")
        return cls.from_dict(doc)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SaveConfig):
            return NotImplemented
        return self._modes == other._modes

    def __hash__(self) -> int:
        return hash(tuple(self._modes.items()))

    def __repr__(self) -> str:
        modes = {m: self._modes[m] for m in ALL_MODES}
        if len(set(modes.values())) == 1:
            return f"SaveConfig(all modes: {modes[ModeKeys.TRAIN]!r})"
        return "SaveConfig({" + ", ".join(f"{m.name}: {v!r}" for m, v in modes.items()) + "})"


__all__ = ["DEFAULT_SAVE_INTERVAL", "SaveConfig", "SaveConfigMode", "parse_steps"]
