"""What a training container learns about profiling: SageMaker's ``profilerconfig.json``.

SageMaker writes the job's ProfilerConfig to ``/opt/ml/input/config/profilerconfig.json``
(``$SMPROFILER_CONFIG_PATH`` overrides the path), e.g.::

    {"DisableProfiler": false, "ProfilingIntervalInMilliseconds": 500,
     "ProfilingParameters": {"LocalPath": "/opt/ml/output/profiler",
                             "RotateMaxFileSizeInBytes": "10485760",
                             "RotateFileCloseIntervalInSeconds": "60",
                             "DetailedProfilingConfig": "{\\"StartStep\\": 5, \\"NumSteps\\": 1, }"}}

Keys are read case-insensitively (as smdebug does); ``ProfilingParameters`` values are strings, and the
metrics configs are SageMaker's almost-JSON strings (a trailing ``, }``). A missing file means profiling
is off; an unreadable one is off too, with one warning that says why.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CONFIG_ENV = "SMPROFILER_CONFIG_PATH"
CONFIG_PATH_DEFAULT = "/opt/ml/input/config/profilerconfig.json"
LOCAL_PATH_DEFAULT = "/opt/ml/output/profiler"
INTERVAL_MS_DEFAULT = 500  # SageMaker's default ProfilingIntervalInMilliseconds
MAX_FILE_SIZE_DEFAULT = 10 * 1024 * 1024
CLOSE_INTERVAL_DEFAULT = 60.0


@dataclass(frozen=True, slots=True)
class StepWindow:
    """A detailed-profiling window: ``num_steps`` steps from ``start_step`` (global steps)."""

    start_step: int
    num_steps: int

    def covers(self, step: int) -> bool:
        return self.start_step <= step < self.start_step + self.num_steps


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilingConfig:
    """The profiler settings of a job, as a container sees them."""

    enabled: bool
    interval_ms: int = INTERVAL_MS_DEFAULT
    local_path: str = LOCAL_PATH_DEFAULT
    max_file_size: int = MAX_FILE_SIZE_DEFAULT
    close_interval: float = CLOSE_INTERVAL_DEFAULT
    detailed: StepWindow | None = None

    @classmethod
    def disabled(cls) -> ProfilingConfig:
        return cls(enabled=False)


def config_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``path``, else ``$SMPROFILER_CONFIG_PATH``, else SageMaker's /opt/ml/input/config/profilerconfig.json."""
    return Path(path if path is not None else os.environ.get(CONFIG_ENV) or CONFIG_PATH_DEFAULT)


def _lower_keys(value: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in value.items()}


def _as_bool(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _number(params: Mapping[str, Any], key: str, default: float, where: str) -> float:
    raw = params.get(key.lower())
    if raw is None:
        return default
    try:
        number = float(raw)
    except (TypeError, ValueError):
        logger.warning("%s: %s=%r is not a number; using %s", where, key, raw, default)
        return default
    if number <= 0:
        logger.warning("%s: %s=%r must be positive; using %s", where, key, raw, default)
        return default
    return number


def _metrics_config(raw: Any) -> dict[str, Any]:
    """A metrics config: a dict, or SageMaker's string form (JSON with a possible trailing ``, }``)."""
    if isinstance(raw, Mapping):
        return _lower_keys(raw)
    text = re.sub(r",\s*}", "}", str(raw))
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"not an object: {raw!r}")
    return _lower_keys(value)


def _detailed_window(params: Mapping[str, Any], where: str) -> StepWindow | None:
    raw = params.get("detailedprofilingconfig")
    if raw is None or raw == "":
        return None
    try:
        fields = _metrics_config(raw)
        if "starttimeinsecsinceepoch" in fields or "duration" in fields or "durationinseconds" in fields:
            logger.warning("%s: DetailedProfilingConfig by time (%r) is not supported; give StartStep and NumSteps",
                           where, raw)
            return None
        start = int(fields.get("startstep", 5))
        num = int(fields.get("numsteps", 1))
    except (TypeError, ValueError) as err:
        logger.warning("%s: DetailedProfilingConfig %r is not valid (%s); no detailed profiling", where, raw, err)
        return None
    if start < 0 or num <= 0:
        logger.warning("%s: DetailedProfilingConfig %r needs StartStep >= 0 and NumSteps > 0; no detailed profiling",
                       where, raw)
        return None
    return StepWindow(start, num)


def parse(document: Mapping[str, Any], *, where: str = "profilerconfig.json") -> ProfilingConfig:
    """A ProfilerConfig (the request's, or profilerconfig.json's content) as a container sees it."""
    top = _lower_keys(document)
    if _as_bool(top.get("disableprofiler", False)):
        return ProfilingConfig.disabled()
    params = _lower_keys(top.get("profilingparameters") or {})
    interval = top.get("profilingintervalinmilliseconds")
    try:
        interval_ms = int(interval) if interval is not None else INTERVAL_MS_DEFAULT
    except (TypeError, ValueError):
        logger.warning("%s: ProfilingIntervalInMilliseconds=%r is not a whole number; using %d", where, interval,
                       INTERVAL_MS_DEFAULT)
        interval_ms = INTERVAL_MS_DEFAULT
    if interval_ms <= 0:
        logger.warning("%s: ProfilingIntervalInMilliseconds=%r must be positive; using %d", where, interval,
                       INTERVAL_MS_DEFAULT)
        interval_ms = INTERVAL_MS_DEFAULT
    return ProfilingConfig(
        enabled=True,
        interval_ms=interval_ms,
        local_path=str(params.get("localpath") or LOCAL_PATH_DEFAULT),
        max_file_size=int(_number(params, "RotateMaxFileSizeInBytes", MAX_FILE_SIZE_DEFAULT, where)),
        close_interval=_number(params, "RotateFileCloseIntervalInSeconds", CLOSE_INTERVAL_DEFAULT, where),
        detailed=_detailed_window(params, where),
    )


def load(path: str | os.PathLike[str] | None = None) -> ProfilingConfig:
    """The config at :func:`config_path`; disabled when there is no file, or (with a warning) a bad one."""
    file = config_path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ProfilingConfig.disabled()
    except OSError as err:
        logger.warning("profiling is off: cannot read %s (%s)", file, err)
        return ProfilingConfig.disabled()
    try:
        document = json.loads(text)
        if not isinstance(document, dict):
            raise ValueError("the top level is not a JSON object")
    except ValueError as err:
        logger.warning("profiling is off: %s is not a profiler config (%s); it should hold the job's ProfilerConfig "
                       "as JSON, e.g. {\"ProfilingIntervalInMilliseconds\": 500}", file, err)
        return ProfilingConfig.disabled()
    return parse(document, where=str(file))


class ConfigFollower:
    """Tells when a profilerconfig.json a running job follows has changed (UpdateTrainingJob rewrites it).

    Args:
        path: the file.
        first_counts: whether the first look at an existing file counts as a change (a reader that has not
            loaded it yet) or only records it (a reader that was built from its settings).
    """

    def __init__(self, path: str | os.PathLike[str], *, first_counts: bool) -> None:
        self.path = Path(path)
        self._first_counts = first_counts
        self._seen: tuple[int, int] | None = None

    def changed(self) -> bool:
        """True when the file's modification time or size differs from the last look (a missing file
        changes nothing)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        seen, before = (st.st_mtime_ns, st.st_size), self._seen
        self._seen = seen
        if before is None:
            return self._first_counts
        return seen != before


__all__ = ["CONFIG_ENV", "CONFIG_PATH_DEFAULT", "LOCAL_PATH_DEFAULT", "ConfigFollower", "ProfilingConfig", "StepWindow",
           "config_path", "load", "parse"]
