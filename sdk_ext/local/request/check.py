"""Checking a CreateTrainingJob request before a local job touches the disk.

Two layers, every problem collected into one :class:`~sdk_ext.exceptions.ConfigError` that names
the field (``sdk-ext run --request`` exits 2 with it):

1. :func:`request_problems`: SageMaker's own limits on each name and path (the patterns and lengths
   of its API reference, as in botocore's ``sagemaker`` model): ``TrainingJobName``, ``ChannelName``,
   ``RuleConfigurationName``, ``S3Uri``, ``LocalPath`` (``DirectoryPath``), parameter maps,
   hyperparameters, the environment. The local runner also takes ``file://`` URIs and local paths
   where SageMaker takes ``S3Uri`` (data stays where it is).
2. :func:`path_problems`: where each name or path lands in the job directory, resolved (``..`` and
   symbolic links followed); anything that would land outside is refused, since a local job runs
   with the user's rights. A ``LocalPath`` must lie under ``/opt/ml`` (the container root, which is
   the job directory here); a channel or rule name must be one directory below its parent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from sdk_ext.exceptions import ConfigError

# SageMaker API patterns (fullmatch) and lengths, from the API reference / botocore's sagemaker model
TRAINING_JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
CHANNEL_NAME = re.compile(r"[A-Za-z0-9.\-_]{1,64}")
S3_URI = re.compile(r"(https|s3)://([^/]+)/?(.*)")
ENVIRONMENT_KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
ANY_LINE = re.compile(r".*")  # SageMaker's ".*": anything but a line break
S3_URI_MAX = 1024
DIRECTORY_PATH_MAX = 4096
NAME_MAX = 256  # RuleConfigurationName, CollectionName, ConfigKey
CONFIG_VALUE_MAX = 256
CONTAINER_ROOT = "/opt/ml"


def _text(value: Any, field: str, problems: list[str], *, pattern: re.Pattern[str] = ANY_LINE, low: int = 0,
          high: int, rule: str) -> str | None:
    """``value`` if it is a string of ``low``-``high`` characters matching ``pattern``; else a problem."""
    if not isinstance(value, str):
        problems.append(f"{field} {value!r}: must be a string ({rule})")
        return None
    if not low <= len(value) <= high or not pattern.fullmatch(value):
        problems.append(f"{field} {value!r}: {rule}")
        return None
    return value


def _s3_uri(value: Any, field: str, problems: list[str], *, local_ok: bool = False) -> None:
    if value is None:
        return
    if local_ok and isinstance(value, str) and urlparse(value).scheme in ("", "file"):
        _text(value, field, problems, high=S3_URI_MAX, rule=f"at most {S3_URI_MAX} characters, one line")
        return
    rule = f"s3://bucket/prefix (SageMaker's S3Uri: (https|s3)://..., at most {S3_URI_MAX} characters)"
    if local_ok:
        rule += "; the local runner also takes a file:// URI or a local path"
    _text(value, field, problems, pattern=S3_URI, high=S3_URI_MAX, rule=rule)


def _params(value: Any, field: str, problems: list[str], *, most: int) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        problems.append(f"{field}: must be a map of strings")
        return
    if len(value) > most:
        problems.append(f"{field}: at most {most} entries (SageMaker's limit), got {len(value)}")
    for key, item in value.items():
        _text(key, f"{field} key", problems, low=1, high=NAME_MAX, rule=f"1-{NAME_MAX} characters, one line")
        _text(item, f"{field}[{key!r}]", problems, high=CONFIG_VALUE_MAX,
              rule=f"at most {CONFIG_VALUE_MAX} characters, one line (SageMaker's ConfigValue)")


def _list(value: Any, field: str, problems: list[str], *, most: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(f"{field}: must be a list")
        return []
    if len(value) > most:
        problems.append(f"{field}: at most {most} entries (SageMaker's limit), got {len(value)}")
    bad = [i for i, item in enumerate(value) if not isinstance(item, Mapping)]
    problems += [f"{field}[{i}]: must be an object" for i in bad]
    return [item for item in value if isinstance(item, Mapping)]


def _section(request: Mapping[str, Any], key: str, problems: list[str]) -> Mapping[str, Any]:
    value = request.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{key}: must be an object")
        return {}
    return value


def request_problems(request: Mapping[str, Any]) -> list[str]:
    """Every name and path of ``request`` that SageMaker's API would refuse (each naming its field)."""
    problems: list[str] = []
    _text(request.get("TrainingJobName"), "TrainingJobName", problems, pattern=TRAINING_JOB_NAME, low=1, high=63,
          rule="1-63 letters, digits and hyphens, starting and ending with a letter or digit (SageMaker's rule)")
    hps = _section(request, "HyperParameters", problems)
    if len(hps) > 100:
        problems.append(f"HyperParameters: at most 100 entries (SageMaker's limit), got {len(hps)}")
    for key, value in hps.items():
        _text(key, "HyperParameters key", problems, high=NAME_MAX, rule=f"at most {NAME_MAX} characters, one line")
        _text(value, f"HyperParameters[{key!r}]", problems, high=2500, rule="at most 2500 characters, one line")
    env = _section(request, "Environment", problems)
    if len(env) > 100:
        problems.append(f"Environment: at most 100 entries (SageMaker's limit), got {len(env)}")
    for key, value in env.items():
        _text(key, "Environment key", problems, pattern=ENVIRONMENT_KEY, high=512,
              rule="a variable name: letters, digits and _, not starting with a digit, at most 512 characters")
        if not isinstance(value, str) or len(value) > 512:
            problems.append(f"Environment[{key!r}]: a string of at most 512 characters")
    _s3_uri(_section(request, "OutputDataConfig", problems).get("S3OutputPath"), "OutputDataConfig.S3OutputPath",
            problems)
    channels = _list(request.get("InputDataConfig"), "InputDataConfig", problems, most=20)
    names = []
    for i, channel in enumerate(channels):
        field = f"InputDataConfig[{i}]"
        names.append(_text(channel.get("ChannelName"), f"{field}.ChannelName", problems, pattern=CHANNEL_NAME,
                           low=1, high=64, rule="1-64 letters, digits, '.', '-' and '_' (SageMaker's ChannelName)"))
        source = ((channel.get("DataSource") or {}).get("S3DataSource") or {}) if isinstance(
            channel.get("DataSource"), Mapping) else {}
        if isinstance(source, Mapping):
            _s3_uri(source.get("S3Uri"), f"{field}.DataSource.S3DataSource.S3Uri", problems, local_ok=True)
    _unique([n for n in names if n], "InputDataConfig ChannelName", problems)
    hook = _section(request, "DebugHookConfig", problems)
    _directory(hook.get("LocalPath"), "DebugHookConfig.LocalPath", problems)
    _s3_uri(hook.get("S3OutputPath"), "DebugHookConfig.S3OutputPath", problems)
    _params(hook.get("HookParameters"), "DebugHookConfig.HookParameters", problems, most=20)
    for i, coll in enumerate(_list(hook.get("CollectionConfigurations"), "DebugHookConfig.CollectionConfigurations",
                                   problems, most=20)):
        field = f"DebugHookConfig.CollectionConfigurations[{i}]"
        _text(coll.get("CollectionName"), f"{field}.CollectionName", problems, low=1, high=NAME_MAX,
              rule=f"1-{NAME_MAX} characters, one line")
        _params(coll.get("CollectionParameters"), f"{field}.CollectionParameters", problems, most=20)
    board = _section(request, "TensorBoardOutputConfig", problems)
    _directory(board.get("LocalPath"), "TensorBoardOutputConfig.LocalPath", problems)
    _s3_uri(board.get("S3OutputPath"), "TensorBoardOutputConfig.S3OutputPath", problems)
    checkpoint = _section(request, "CheckpointConfig", problems)
    _directory(checkpoint.get("LocalPath"), "CheckpointConfig.LocalPath", problems)
    _s3_uri(checkpoint.get("S3Uri"), "CheckpointConfig.S3Uri", problems)
    if request.get("ProfilerConfig") is not None:
        problems += profiler_config_problems(request["ProfilerConfig"], "ProfilerConfig")
    for key in ("DebugRuleConfigurations", "ProfilerRuleConfigurations"):
        rule_names = []
        for i, rule in enumerate(_list(request.get(key), key, problems, most=20)):
            field = f"{key}[{i}]"
            rule_names.append(_text(rule.get("RuleConfigurationName"), f"{field}.RuleConfigurationName", problems,
                                    low=1, high=NAME_MAX, rule=f"1-{NAME_MAX} characters, one line"))
            _directory(rule.get("LocalPath"), f"{field}.LocalPath", problems)
            _s3_uri(rule.get("S3OutputPath"), f"{field}.S3OutputPath", problems)
            _params(rule.get("RuleParameters"), f"{field}.RuleParameters", problems, most=100)
        _unique([n for n in rule_names if n], f"{key} RuleConfigurationName", problems)
    return problems


PROFILING_INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)  # the values SageMaker's API accepts


def profiler_config_problems(config: Any, field: str, *, update: bool = False) -> list[str]:
    """A ProfilerConfig (or UpdateTrainingJob's ProfilerConfigForUpdate) as SageMaker's API checks it."""
    problems: list[str] = []
    if not isinstance(config, Mapping):
        return [f"{field}: must be an object"]
    known = {"S3OutputPath", "ProfilingIntervalInMilliseconds", "ProfilingParameters", "DisableProfiler"}
    unknown = sorted(set(config) - known)
    if unknown:
        problems.append(f"{field}: unknown key(s) {', '.join(map(repr, unknown))}; SageMaker takes "
                        f"{', '.join(sorted(known))}")
    interval = config.get("ProfilingIntervalInMilliseconds")
    if interval is not None and (isinstance(interval, bool) or interval not in PROFILING_INTERVALS_MS):
        problems.append(f"{field}.ProfilingIntervalInMilliseconds {interval!r}: SageMaker accepts "
                        f"{', '.join(map(str, PROFILING_INTERVALS_MS))} (milliseconds)")
    disable = config.get("DisableProfiler")
    if disable is not None and not isinstance(disable, bool):
        problems.append(f"{field}.DisableProfiler {disable!r}: must be true or false")
    _s3_uri(config.get("S3OutputPath"), f"{field}.S3OutputPath", problems)
    _params(config.get("ProfilingParameters"), f"{field}.ProfilingParameters", problems, most=20)
    parameters = config.get("ProfilingParameters")
    if isinstance(parameters, Mapping):
        _directory(parameters.get("LocalPath"), f"{field}.ProfilingParameters.LocalPath", problems)
    return problems


def _directory(value: Any, field: str, problems: list[str]) -> None:
    if value is not None:
        _text(value, field, problems, high=DIRECTORY_PATH_MAX,
              rule=f"a path of at most {DIRECTORY_PATH_MAX} characters, one line")


def _unique(names: list[str], field: str, problems: list[str]) -> None:
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        problems.append(f"{field} values must be unique; repeated: {', '.join(map(repr, repeated))}")


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, resolved (``..`` and existing symbolic links followed), lies in ``root`` (resolved)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


def one_below(parent: Path, name: str) -> bool:
    """Whether ``parent / name`` resolves to a direct child of ``parent`` (a plain directory name)."""
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name and \
        Path(os.path.realpath(parent / name)).parent == Path(os.path.realpath(parent))


def container_path(root: Path, value: str) -> Path | None:
    """A container ``LocalPath`` (under /opt/ml) inside the job directory ``root``, or None if it is not
    under /opt/ml (normalized: ``/opt/ml/../x`` is not)."""
    normal = os.path.normpath(value)
    if not os.path.isabs(normal) or os.path.commonpath([normal, CONTAINER_ROOT]) != CONTAINER_ROOT:
        return None
    return root / os.path.relpath(normal, CONTAINER_ROOT)


def path_problems(root: Path, request: Mapping[str, Any]) -> list[str]:
    """Every name or path of ``request`` that would make the job write outside its directory ``root``."""
    problems: list[str] = []
    for key, field in (("DebugHookConfig", "DebugHookConfig.LocalPath"),
                       ("TensorBoardOutputConfig", "TensorBoardOutputConfig.LocalPath"),
                       ("ProfilerConfig", "ProfilerConfig.ProfilingParameters.LocalPath")):
        section = request.get(key)
        value = section.get("LocalPath") if isinstance(section, Mapping) else None
        if key == "ProfilerConfig":
            parameters = section.get("ProfilingParameters") if isinstance(section, Mapping) else None
            value = parameters.get("LocalPath") if isinstance(parameters, Mapping) else None
        if not isinstance(value, str) or not value:
            continue
        target = container_path(root, value)
        if target is None or not inside(root, target):
            problems.append(f"{field} {value!r} resolves outside the job directory {root}; use a path under "
                            f"{CONTAINER_ROOT} (e.g. {CONTAINER_ROOT}/output/tensors), which is the job directory here")
    data = root / "input" / "data"
    for i, channel in enumerate(request.get("InputDataConfig") or []):
        name = channel.get("ChannelName") if isinstance(channel, Mapping) else None
        if isinstance(name, str) and not one_below(data, name):
            problems.append(f"InputDataConfig[{i}].ChannelName {name!r} resolves outside {data}; a channel name is "
                            "one directory name (letters, digits, '.', '-', '_'; not '.' or '..')")
    rules = root / "rules"
    for i, rule in enumerate(request.get("DebugRuleConfigurations") or []):
        name = rule.get("RuleConfigurationName") if isinstance(rule, Mapping) else None
        if isinstance(name, str) and not one_below(rules, name):
            problems.append(f"DebugRuleConfigurations[{i}].RuleConfigurationName {name!r} resolves outside {rules}; "
                            "locally the name is a directory: no '/', not '.' or '..'")
    return problems


def check_request(request: Mapping[str, Any], job_dir: Path | None = None) -> None:
    """Raise ConfigError listing every problem: SageMaker's limits, then (given ``job_dir``) confinement."""
    problems = request_problems(request)
    if job_dir is not None and not problems:
        problems = path_problems(job_dir, request)
    if problems:
        raise ConfigError(problems, where="CreateTrainingJob request")


__all__ = ["check_request", "container_path", "inside", "one_below", "path_problems", "request_problems"]
