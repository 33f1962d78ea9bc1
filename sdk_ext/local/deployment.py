"""Where the two deployment roots are, and loading the auto-stop function from one of them.

``rules/evaluate.py`` (the rule evaluator) and ``lambda/auto_stop.py`` (the auto-stop function) are not
packages (DESIGN.md): they live beside ``sdk_ext/`` in the checkout, which is also where
``pip install -e .`` leaves them. Each is found, in this order, from an explicit argument, an
environment variable (``SDK_EXT_RULES_DIR``, ``SDK_EXT_LAMBDA_DIR``), or the checkout this package
was imported from.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from sdk_ext.exceptions import ConfigError

CHECKOUT = Path(__file__).resolve().parent.parent.parent
SDK_EXT_PARENT = CHECKOUT  # the directory to put on PYTHONPATH so children import this same sdk_ext


def _find(explicit: str | os.PathLike[str] | None, env: str, leaf: str, file: str) -> Path:
    candidates = [(Path(explicit), "given")] if explicit is not None else []
    if os.environ.get(env):
        candidates.append((Path(os.environ[env]), f"${env}"))
    candidates.append((CHECKOUT / leaf, "the checkout sdk_ext was imported from"))
    for directory, _ in candidates:
        if (directory / file).is_file():
            return directory.resolve()
    tried = ", ".join(f"{d / file} ({why})" for d, why in candidates)
    raise ConfigError(
        f"{leaf}/{file} not found (tried {tried}); run from a checkout of sdk_ext (pip install -e .), "
        f"or set {env} to the directory that holds {file}", where="sdk_ext.local")


def rules_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding ``evaluate.py``."""
    return _find(explicit, "SDK_EXT_RULES_DIR", "rules", "evaluate.py")


def lambda_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding ``auto_stop.py`` and ``auto_stop_policy.py``."""
    return _find(explicit, "SDK_EXT_LAMBDA_DIR", "lambda", "auto_stop.py")


def _same_file(module: ModuleType | None, path: Path) -> bool:
    origin = getattr(module, "__file__", None)
    return origin is not None and Path(origin).resolve() == path.resolve()


def _load(name: str, path: Path) -> ModuleType:
    loaded = sys.modules.get(name)
    if loaded is not None:
        if _same_file(loaded, path):
            return loaded
        raise ConfigError(f"a different module named {name!r} is imported already ({loaded.__file__}); "
                          f"cannot load {path}", where="sdk_ext.local")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {path}", where="sdk_ext.local")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # auto_stop imports auto_stop_policy by this name; dataclasses need it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_auto_stop(directory: str | os.PathLike[str] | None = None) -> ModuleType:
    """Import ``auto_stop`` (and its sibling ``auto_stop_policy``) from the lambda directory.

    The modules are registered under their own names, as Lambda imports them, without putting the
    directory on ``sys.path``. Already imported from the same files (pytest puts lambda/ on the path):
    those modules are returned.
    """
    root = lambda_dir(directory)
    _load("auto_stop_policy", root / "auto_stop_policy.py")
    return _load("auto_stop", root / "auto_stop.py")


def child_pythonpath(existing: str | None) -> str:
    """PYTHONPATH for a child that must import this same sdk_ext (the checkout first)."""
    parts = [str(SDK_EXT_PARENT)]
    if existing:
        parts += [p for p in existing.split(os.pathsep) if p and p != str(SDK_EXT_PARENT)]
    return os.pathsep.join(parts)
