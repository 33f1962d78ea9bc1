"""Hook configuration from SageMaker's ``debughookconfig.json`` (the request's ``DebugHookConfig``).

SageMaker writes the CreateTrainingJob ``DebugHookConfig`` into the training container as
``/opt/ml/input/config/debughookconfig.json`` (``$SMDEBUG_CONFIG_FILE_PATH`` overrides)::

    {"S3OutputPath": "s3://bucket/prefix",            # ignored: SageMaker uploads LocalPath there
     "LocalPath": "/opt/ml/output/tensors",           # out_dir (this is the default)
     "HookParameters": {"save_interval": "100", "eval.save_interval": "10", "reductions": "mean,l2_norm",
                        "save_raw_tensor": "true", "include_regex": "fc1.*,fc2.*", "save_all": "false",
                        "include_workers": "one", "export_tensorboard": "false", "tensorboard_dir": "/path"},
     "CollectionConfigurations": [{"CollectionName": "gradients", "CollectionParameters": {"save_interval": "10"}},
                                  {"CollectionName": "losses"}]}

Mapping (smdebug's, README.md#saving-tensors-in-training-hooks): hook parameters give the hook's save config (per mode:
plain keys, overridden by ``train.``/``eval.``/``predict.``/``global.`` keys), its reduction config
(only if ``reductions`` is given; then ``save_raw_tensor`` defaults to false), ``include_regex``,
``save_all``, ``include_workers``. Every named collection is saved; its save config is the hook's,
overridden by the collection's plain keys, overridden by its mode keys. A collection named twice
(a rule and the user both ask for it) gets both parameter sets applied in list order.

Keys smdebug does not read either (``S3Path``, a misspelt parameter) are ignored with one warning
that lists them (with a "did you mean" for a likely typo). Differences from smdebug: a bad number,
boolean or regex, or a value of the wrong type, raises ConfigError naming the key (smdebug
ignored some of these or failed later); booleans may be JSON booleans or "true"/"false" strings;
``save_shape``/``save_raw_tensor`` count without ``reductions`` too.
Inside SageMaker (``TRAINING_JOB_NAME`` set) TensorBoard export follows
``tensorboardoutputconfig.json`` (``$TENSORBOARD_CONFIG_FILE_PATH``), as in smdebug.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks.collections import Collection
from sdk_ext.hooks.reduction_config import ReductionConfig, parse_bool
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode
from sdk_ext.modes import ModeKeys

logger = logging.getLogger(__name__)

DEFAULT_CONFIG_PATH = "/opt/ml/input/config/debughookconfig.json"
DEFAULT_TENSORBOARD_CONFIG_PATH = "/opt/ml/input/config/tensorboardoutputconfig.json"
DEFAULT_OUT_DIR = "/opt/ml/output/tensors"
DEFAULT_TENSORBOARD_DIR = "/opt/ml/output/tensorboard"
CONFIG_PATH_ENV = "SMDEBUG_CONFIG_FILE_PATH"
TENSORBOARD_CONFIG_PATH_ENV = "TENSORBOARD_CONFIG_FILE_PATH"

_SAVE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
_MODE_PREFIXES = {"train.": ModeKeys.TRAIN, "eval.": ModeKeys.EVAL, "predict.": ModeKeys.PREDICT, "global.": ModeKeys.GLOBAL}
_REDUCTION_KEYS = ("reductions", "save_raw_tensor", "save_shape")
HOOK_KEYS = frozenset(
    (*_SAVE_KEYS, *_REDUCTION_KEYS, "include_regex", "save_all", "include_workers", "export_tensorboard", "tensorboard_dir")
)
#: Top-level keys of the DebugHookConfig (SageMaker reads S3OutputPath; the hook does not need it).
_TOP_KEYS = frozenset(("S3OutputPath", "LocalPath", "HookParameters", "CollectionConfigurations"))
COLLECTION_KEYS = frozenset((*_SAVE_KEYS, *_REDUCTION_KEYS, "include_regex", "save_histogram"))


def config_path(path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> str:
    """The config file to read: ``path``, else ``$SMDEBUG_CONFIG_FILE_PATH``, else SageMaker's default."""
    env = os.environ if env is None else env
    return os.fspath(path) if path is not None else env.get(CONFIG_PATH_ENV, DEFAULT_CONFIG_PATH)


class ConfigFileNotFound(ConfigError, FileNotFoundError):
    """The configuration file does not exist (a FileNotFoundError too, which smdebug raised here)."""


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse the JSON file. Raises ConfigError if it is missing or not a JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError as err:
        raise ConfigFileNotFound(f"debug hook config file {path} does not exist", where="debug hook config") from err
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read {path} as JSON: {err}", where="debug hook config") from err
    if not isinstance(doc, dict):
        raise ConfigError(f"{path} must hold a JSON object (the DebugHookConfig), got {type(doc).__name__}",
                          where="debug hook config")
    return doc


def _split_keys(params: Mapping[str, Any], allowed: frozenset[str], where: str, ignored: list[str]) -> None:
    """Note in ``ignored`` every key of ``params`` that smdebug would not read either."""
    for key in params:
        base = key
        for prefix in _MODE_PREFIXES:
            if key.startswith(prefix):
                base = key[len(prefix):]
                if base not in _SAVE_KEYS:
                    ignored.append(f"{where}: {key!r} (only {', '.join(_SAVE_KEYS)} take a mode prefix)")
                break
        else:
            if base not in allowed:
                close = difflib.get_close_matches(base, sorted(allowed), n=1, cutoff=0.8)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                ignored.append(f"{where}: {key!r}{hint}")


def _save_values(params: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k: params[prefix + k] for k in _SAVE_KEYS if prefix + k in params}


def save_config_from_params(params: Mapping[str, Any], base: SaveConfig | None = None) -> SaveConfig:
    """Per mode: ``base``'s values, overridden by the plain keys, overridden by the mode's keys."""
    plain = _save_values(params, "")
    modes: dict[ModeKeys | str, SaveConfigMode | Mapping[str, Any] | None] = {}
    for prefix, mode in _MODE_PREFIXES.items():
        values = dict(base.get_save_config(mode).to_json_dict()) if base is not None else {}
        values.update(plain)
        values.update(_save_values(params, prefix))
        modes[mode] = SaveConfigMode.from_dict(values)
    return SaveConfig(modes)


def reduction_config_from_params(params: Mapping[str, Any]) -> ReductionConfig:
    """``reductions``/``save_raw_tensor``/``save_shape``. With ``reductions``, raw values are saved only if
    ``save_raw_tensor`` says so (smdebug's rule); without, they are saved unless it says no (smdebug
    ignored ``save_shape`` and ``save_raw_tensor`` when ``reductions`` was absent)."""
    values = dict(params)
    values.setdefault("save_raw_tensor", "reductions" not in params)
    return ReductionConfig.from_dict({k: values[k] for k in _REDUCTION_KEYS if k in values})


def _csv(value: Any, what: str) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{what} must be a comma-separated string, got {value!r}", where="debug hook config")


def _collect(problems: list[str], func: Any, *args: Any) -> Any:
    try:
        return func(*args)
    except ConfigError as err:
        problems += err.problems
        return None


def hook_kwargs_from_config(
    config: Mapping[str, Any], *, builtin: Mapping[str, Iterable[str]], env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Constructor arguments of a hook for a ``DebugHookConfig`` dict.

    Args:
        config: the DebugHookConfig (``LocalPath``, ``HookParameters``, ``CollectionConfigurations``).
        builtin: the hook class's built-in collections and their regexes.
        env: the environment (``TRAINING_JOB_NAME``, ``TENSORBOARD_CONFIG_FILE_PATH``); default os.environ.

    Raises:
        ConfigError: every problem found, each naming its key.
    """
    env = os.environ if env is None else env
    problems: list[str] = []
    ignored = [f"top-level key {k!r}" for k in config if k not in _TOP_KEYS]
    hook_params = config.get("HookParameters") or {}
    if not isinstance(hook_params, Mapping):
        raise ConfigError(f"HookParameters must be an object, got {hook_params!r}", where="debug hook config")
    _split_keys(hook_params, HOOK_KEYS, "HookParameters", ignored)

    save_config = _collect(problems, save_config_from_params, hook_params) or SaveConfig()
    kwargs: dict[str, Any] = {"save_config": save_config}
    if any(k in hook_params for k in _REDUCTION_KEYS):
        kwargs["reduction_config"] = _collect(problems, reduction_config_from_params, hook_params)
    if "include_regex" in hook_params:
        kwargs["include_regex"] = _collect(problems, _csv, hook_params["include_regex"], "include_regex")
    if "save_all" in hook_params:
        kwargs["save_all"] = _collect(problems, parse_bool, hook_params["save_all"], "save_all")
    if "include_workers" in hook_params:
        kwargs["include_workers"] = str(hook_params["include_workers"]).strip()

    if "TRAINING_JOB_NAME" in env:  # inside SageMaker: TensorBoard only if the job asked for it
        tb_file = env.get(TENSORBOARD_CONFIG_PATH_ENV, DEFAULT_TENSORBOARD_CONFIG_PATH)
        if os.path.isfile(tb_file):
            tb = _collect(problems, load_config_file, tb_file) or {}
            kwargs["export_tensorboard"] = True
            kwargs["tensorboard_dir"] = tb.get("LocalPath") or DEFAULT_TENSORBOARD_DIR
    else:
        if "export_tensorboard" in hook_params:
            kwargs["export_tensorboard"] = _collect(problems, parse_bool, hook_params["export_tensorboard"], "export_tensorboard")
        if hook_params.get("tensorboard_dir"):
            kwargs["tensorboard_dir"] = str(hook_params["tensorboard_dir"])

    collections: dict[str, Collection] = {}
    settings: dict[str, dict[str, Any]] = {}
    configs = config.get("CollectionConfigurations") or []
    if not isinstance(configs, list):
        problems.append(f"CollectionConfigurations must be a list, got {configs!r}")
        configs = []
    for i, entry in enumerate(configs):
        name = entry.get("CollectionName") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            problems.append(f"CollectionConfigurations[{i}] has no CollectionName")
            continue
        params = entry.get("CollectionParameters") or {}
        if not isinstance(params, Mapping):
            problems.append(f"collection {name!r}: CollectionParameters must be an object")
            continue
        _split_keys(params, COLLECTION_KEYS, f"collection {name!r}", ignored)
        merged = settings.setdefault(name, {})
        conflicts = [k for k in params if k in merged and merged[k] != params[k]]
        if conflicts:
            logger.warning("collection %r is configured twice; the later values win for %s", name, ", ".join(conflicts))
        merged.update(params)
    for name, params in settings.items():
        coll = _collect(problems, _collection, name, params, builtin, save_config)
        if coll is not None:
            collections[name] = coll
    out_dir = config.get("LocalPath") or DEFAULT_OUT_DIR
    for what, path in (("LocalPath", out_dir), ("tensorboard_dir", kwargs.get("tensorboard_dir"))):
        if path is None:
            continue
        if not isinstance(path, str):
            problems.append(f"{what} must be a path string, got {path!r}")
        elif "\x00" in path:  # no file system takes it: the first write would fail, mid-training
            problems.append(f"{what} {path!r} holds a NUL character (\\x00), which no path can; fix the path "
                            "in the job's DebugHookConfig (or TensorBoardOutputConfig)")
    if problems:
        raise ConfigError(problems, where="debug hook config")
    if ignored:
        logger.warning("debug hook config: ignoring keys that neither sdk_ext nor smdebug reads: %s", "; ".join(ignored))
    kwargs["include_collections"] = list(collections)
    kwargs["collections"] = list(collections.values())
    kwargs["out_dir"] = out_dir
    return kwargs


# --- smdebug's staged reading of the same file (smdebug.core.json_config), on the parser above -------


def get_json_config_as_dict(json_config_path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The DebugHookConfig document: ``json_config_path``, else ``$SMDEBUG_CONFIG_FILE_PATH``, else SageMaker's
    default path. Raises ConfigFileNotFound (a FileNotFoundError) if there is none."""
    return load_config_file(config_path(json_config_path))


def collect_hook_config_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The hook-level settings of a DebugHookConfig as smdebug's dict: ``out_dir``, ``save_config``,
    ``reduction_config`` (None unless given), ``include_regex`` (None unless given), ``save_all``,
    ``include_workers``, ``export_tensorboard``, ``tensorboard_dir`` (HookParameters' values; inside
    SageMaker the hook itself follows ``tensorboardoutputconfig.json``, see :func:`hook_kwargs_from_config`).

    Raises:
        ConfigError: every problem of the document, each naming its key.
    """
    kwargs = hook_kwargs_from_config(config, builtin={}, env={})
    return {
        "out_dir": kwargs["out_dir"],
        "save_config": kwargs["save_config"],
        "reduction_config": kwargs.get("reduction_config"),
        "include_regex": kwargs.get("include_regex"),
        "save_all": kwargs.get("save_all", False),
        "include_workers": kwargs.get("include_workers", "one"),
        "export_tensorboard": kwargs.get("export_tensorboard", False),
        "tensorboard_dir": kwargs.get("tensorboard_dir"),
    }


def get_include_collections(config: Mapping[str, Any]) -> list[str] | None:
    """The collection names of ``CollectionConfigurations`` in order (once each), None without the key."""
    entries = config.get("CollectionConfigurations")
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise ConfigError(f"CollectionConfigurations must be a list, got {entries!r}", where="debug hook config")
    names: list[str] = []
    for i, entry in enumerate(entries):
        name = entry.get("CollectionName") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f"CollectionConfigurations[{i}] has no CollectionName", where="debug hook config")
        if name not in names:
            names.append(name)
    return names


def add_collections_to_manager(manager: Any, config: Mapping[str, Any], hook_params: Mapping[str, Any]) -> None:
    """Configure ``manager``'s collections as ``CollectionConfigurations`` says (created if missing), each
    save config completed from the hook's (``hook_params["save_config"]``, see :func:`collect_hook_config_params`)."""
    kwargs = hook_kwargs_from_config(config, builtin={}, env={})
    hook_save = hook_params.get("save_config") or kwargs["save_config"]
    for configured in kwargs["collections"]:
        coll = manager.get(configured.name)
        params = _collection_params(config, configured.name)
        coll.save_config = save_config_from_params(params, hook_save)
        if configured.reduction_config is not None:
            coll.reduction_config = configured.reduction_config
        if configured.include_regex:
            coll.include(configured.include_regex)
        coll.save_histogram = configured.save_histogram


def _collection_params(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for entry in config.get("CollectionConfigurations") or []:
        if isinstance(entry, Mapping) and entry.get("CollectionName") == name:
            merged.update(entry.get("CollectionParameters") or {})
    return merged


def _collection(name: str, params: Mapping[str, Any], builtin: Mapping[str, Iterable[str]], hook_save: SaveConfig) -> Collection:
    problems: list[str] = []
    coll = Collection(name, include_regex=list(builtin.get(name, ())))
    if any(k in params for k in _SAVE_KEYS) or any(k.startswith(tuple(_MODE_PREFIXES)) for k in params):
        coll.save_config = _collect(problems, save_config_from_params, params, hook_save)
    if any(k in params for k in _REDUCTION_KEYS):
        coll.reduction_config = _collect(problems, reduction_config_from_params, params)
    if "include_regex" in params:
        regexes = _collect(problems, _csv, params["include_regex"], f"collection {name!r} include_regex")
        if regexes:
            _collect(problems, coll.include, regexes)
    if "save_histogram" in params:
        flag = _collect(problems, parse_bool, params["save_histogram"], f"collection {name!r} save_histogram")
        if flag is not None:
            coll.save_histogram = flag
    if problems:
        raise ConfigError(problems, where=f"collection {name!r}")
    return coll


__all__ = [
    "COLLECTION_KEYS",
    "ConfigFileNotFound",
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_OUT_DIR",
    "HOOK_KEYS",
    "add_collections_to_manager",
    "collect_hook_config_params",
    "config_path",
    "get_include_collections",
    "get_json_config_as_dict",
    "hook_kwargs_from_config",
    "load_config_file",
    "reduction_config_from_params",
    "save_config_from_params",
]
