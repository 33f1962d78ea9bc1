"""How the rule evaluator is started, and loading the auto-stop function.

The rule evaluator is :mod:`sdk_ext.evaluator` (``rules/evaluate.py`` is its thin container entry
point): it runs as ``python -m sdk_ext.evaluator`` unless a rules directory holding another
``evaluate.py`` is given (argument or ``SDK_EXT_RULES_DIR``).

The auto-stop function (``lambda/auto_stop.py`` and ``auto_stop_policy.py``) is not a package
(docs/ARCHITECTURE.md#where-things-run): ``lambda/`` is the Lambda asset, and the wheel installs the same two files as
``sdk_ext/lambda_function/`` (setup.py maps the directory; there is no second copy in the checkout).
They are found, in this order, from an explicit argument, ``SDK_EXT_LAMBDA_DIR``, the installed
package, or the checkout this package was imported from; and loaded as Lambda loads them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from sdk_ext.exceptions import ConfigError

PACKAGE = Path(__file__).resolve().parents[2]  # sdk_ext/
CHECKOUT = PACKAGE.parent
SDK_EXT_PARENT = CHECKOUT  # the directory to put on PYTHONPATH so children import this same sdk_ext
PACKAGED_LAMBDA = PACKAGE / "lambda_function"  # lambda/, as the wheel installs it
EVALUATOR_MODULE = "sdk_ext.evaluator"


def _find(candidates: list[tuple[Path, str]], env: str, leaf: str, file: str) -> Path:
    for directory, _ in candidates:
        if (directory / file).is_file():
            return directory.resolve()
    tried = ", ".join(f"{d / file} ({why})" for d, why in candidates)
    raise ConfigError(
        f"{leaf}/{file} not found (tried {tried}); install sdk-ext (pip install sdk-ext) or run from a "
        f"checkout of sdk_ext, or set {env} to the directory that holds {file}", where="sdk_ext.local")


def _given(explicit: str | os.PathLike[str] | None, env: str) -> list[tuple[Path, str]]:
    candidates = [(Path(explicit), "given")] if explicit is not None else []
    if os.environ.get(env):
        candidates.append((Path(os.environ[env]), f"${env}"))
    return candidates


def evaluator_command(explicit: str | os.PathLike[str] | None = None) -> list[str]:
    """The rule evaluator's command after the Python interpreter.

    ``[<dir>/evaluate.py]`` when a rules directory is given (``explicit`` or ``SDK_EXT_RULES_DIR``),
    else ``["-m", "sdk_ext.evaluator"]``, the evaluator of this package.

    Raises:
        ConfigError: a rules directory was given but holds no ``evaluate.py``.
    """
    given = _given(explicit, "SDK_EXT_RULES_DIR")
    if not given:
        return ["-m", EVALUATOR_MODULE]
    return [str(_find(given, "SDK_EXT_RULES_DIR", "rules", "evaluate.py") / "evaluate.py")]


def lambda_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The directory holding ``auto_stop.py`` and ``auto_stop_policy.py``."""
    candidates = _given(explicit, "SDK_EXT_LAMBDA_DIR")
    candidates.append((PACKAGED_LAMBDA, "the installed sdk_ext"))
    candidates.append((CHECKOUT / "lambda", "the checkout sdk_ext was imported from"))
    return _find(candidates, "SDK_EXT_LAMBDA_DIR", "lambda", "auto_stop.py")


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
