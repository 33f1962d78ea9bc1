"""Which framework a training script uses, and how its hook is added without code changes.

SageMaker's framework containers add the Debugger hook to a script that has no hook code ("zero script
change"). A local job does the same: a Python entry point that imports a framework listed here runs
through that framework's launcher (``python -m <launcher> SCRIPT ARGS``), which creates the hook from
the job's debughookconfig.json. A script that creates its own hook as well gets the same one hook (one
hook per process, sdk_ext.hooks.registry). The request's ``Environment`` may say otherwise:
``SDK_EXT_ZERO_CHANGE=0`` (never) or ``1`` (always, as PyTorch when nothing is detected).

A framework is detected from the script's own imports (its syntax tree; the script is not run).
To add one: an entry in :data:`LAUNCHERS` and the top-level module names that mean it in :data:`IMPORTS`.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: framework -> the module run as ``python -m`` to arm its zero-change hook
LAUNCHERS: dict[str, str] = {
    "keras": "sdk_ext.keras.run", "pytorch": "sdk_ext.pytorch.run", "xgboost": "sdk_ext.xgboost.run",
}
#: framework -> top-level modules whose import means the script uses it
#: (in order: a Keras-on-torch script imports both and runs through the Keras launcher; a script that imports
#: torch and xgboost runs through the PyTorch launcher)
IMPORTS: dict[str, tuple[str, ...]] = {
    "keras": ("keras", "tensorflow", "tf_keras"),
    "pytorch": ("torch", "torchvision", "lightning", "pytorch_lightning"),
    "xgboost": ("xgboost",),
}
#: the framework ``SDK_EXT_ZERO_CHANGE=1`` uses when none is detected
DEFAULT = "pytorch"
ENV = "SDK_EXT_ZERO_CHANGE"


def imported_modules(script: Path) -> set[str]:
    """Top-level names of the modules ``script`` imports; empty if it cannot be read or parsed (the job
    then reports the script's own error, with its file and line)."""
    try:
        tree = ast.parse(script.read_bytes(), filename=str(script))
    except (OSError, SyntaxError, ValueError) as err:
        logger.debug("imports of %s not read: %s", script, err)
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def detect(script: Path) -> str | None:
    """The framework ``script`` imports (the first of :data:`IMPORTS` that matches), or None."""
    modules = imported_modules(script)
    return next((fw for fw, names in IMPORTS.items() if modules.intersection(names)), None)


def requested(environment: Mapping[str, Any] | None) -> bool | None:
    """What the request's ``Environment`` says about zero-change: True, False, or None (not said)."""
    value = str((environment or {}).get(ENV, "")).strip().lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    return None


def launcher(script: Path, zero_change: bool | None) -> str | None:
    """The launcher module for ``script``: None means ``python SCRIPT`` as it is.

    ``zero_change``: True always (the detected framework, else :data:`DEFAULT`); False never; None
    when the script imports a framework of :data:`LAUNCHERS`.
    """
    if zero_change is False:
        return None
    framework = detect(script)
    if framework is None and zero_change:
        framework = DEFAULT
    return LAUNCHERS.get(framework) if framework is not None else None


__all__ = ["DEFAULT", "ENV", "IMPORTS", "LAUNCHERS", "detect", "imported_modules", "launcher", "requested"]
