"""What every framework's zero-change path shares: the ``USE_SMDEBUG`` switch, smdebug's ``get_hook``
over the process's hook, log output for scripts that configured none, and the ``python -m ... run`` entry.

Each framework (sdk_ext.pytorch / .xgboost / .keras ``zero_change``) keeps its own state (a dict with at least
``failed``, ``installed``, ``path``, ``finder``) and its own way of arming the hook; these functions take what
differs (the hook class, that state, the arming and disarming) as arguments. :func:`install` and :func:`uninstall`
hold one lock, so concurrent calls arm and disarm a framework once.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import runpy
import sys
import threading
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any, TypeVar

from sdk_ext.exceptions import ConfigError, SMDebugTypeError
from sdk_ext.hooks import json_config, registry

logger = logging.getLogger(__name__)

H = TypeVar("H")

_lock = threading.Lock()  # guards every framework's state while it is armed or disarmed


def install(state: MutableMapping[str, Any], json_config_path: str | None, arm: Callable[[str], None], *,
            what: str, when: str) -> bool:
    """Arm a framework's zero-change hook once: True if a config was found (also when already armed).

    ``arm(path)`` does the framework's part (a global module pre-hook, a patch of ``train`` or ``fit``...);
    nothing is armed without a config file or with ``USE_SMDEBUG`` off. ``what``/``when`` go into the log
    line ("the XGBoost debugger hook will be created from PATH at the first training").
    """
    with _lock:
        if state["installed"]:
            return True
        path = json_config.config_path(json_config_path)
        if not enabled() or not os.path.isfile(path):
            return False
        state.update(installed=True, path=path)
        ensure_log_output()
        arm(path)
    logger.info("sdk_ext: the %s hook will be created from %s %s", what, path, when)
    return True


def arm_on_import(state: MutableMapping[str, Any], name: str, patch: Callable[[Any], None], what: str) -> None:
    """``patch(module)`` now if ``import <name>`` has run, else right after it runs (:class:`PatchOnImport`,
    kept in ``state["finder"]``)."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        finder = PatchOnImport(name, patch, what)
        state["finder"] = finder
        finder.install()


def uninstall(state: MutableMapping[str, Any], disarm: Callable[[], None], **reset: Any) -> None:
    """Undo :func:`install`: remove a pending import finder, ``disarm()`` the framework's part, close the
    process's hook (it is forgotten), and reset ``state`` (``failed``, ``installed``, ``path``, ``finder``
    plus the framework's own ``reset`` values)."""
    with _lock:
        finder = state.get("finder")
        if finder is not None:
            finder.remove()
        disarm()
        hook = registry.current()
        if hook is not None:
            hook.close()
        registry.forget()
        state.update(failed=None, installed=False, path=None, finder=None, **reset)


def enabled() -> bool:
    """smdebug's switch: ``USE_SMDEBUG`` set to 0 or false turns the zero-change hook off."""
    return os.environ.get("USE_SMDEBUG", "true").strip().lower() not in ("0", "false")


def get_hook(hook_cls: type[H], json_config_path: str | None, create_if_not_exists: bool,
             state: MutableMapping[str, Any]) -> H | None:
    """The process's hook if it is a ``hook_cls``, or (``create_if_not_exists``) a new one from the config,
    which then is the process's hook.

    None when there is none and there is no config file, ``USE_SMDEBUG`` is off, or the config is invalid
    (logged once per path: ``state["failed"]`` remembers it).
    """
    with registry.lock:
        hook = registry.current()
        if isinstance(hook, hook_cls) or not create_if_not_exists:
            return hook if isinstance(hook, hook_cls) else None
        path = json_config.config_path(json_config_path)
        if not enabled() or not os.path.isfile(path) or state["failed"] == path:
            return None
        try:
            return hook_cls.create_from_json_file(path)  # type: ignore[attr-defined, no-any-return]
        except ConfigError as err:
            logger.error("sdk_ext: not saving debugging data: %s", err)
            state["failed"] = path
            return None


def set_hook(custom_hook: Any) -> None:
    """Make ``custom_hook`` the process's hook (smdebug's ``set_hook``): ``get_hook()`` returns it from now on.

    Raises:
        SMDebugTypeError: ``custom_hook`` is not an sdk_ext hook.
    """
    from sdk_ext.hooks.hook import Hook

    if not isinstance(custom_hook, Hook):
        raise SMDebugTypeError(f"set_hook takes an sdk_ext hook, got {type(custom_hook).__name__}")
    registry.register(custom_hook)


def del_hook() -> None:
    """Forget the process's hook (smdebug's ``del_hook``): the next ``get_hook(create_if_not_exists=True)``
    creates a new one. The forgotten hook is not closed; it still closes at exit."""
    registry.forget()


def ensure_log_output() -> None:
    """A script that configured no logging would never show the hook's messages (errors included):
    send sdk_ext's records to stderr then, as smdebug did."""
    package = logging.getLogger("sdk_ext")
    if logging.getLogger().handlers or any(not isinstance(h, logging.NullHandler) for h in package.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[sdk_ext %(levelname)s %(asctime)s] %(message)s"))
    package.addHandler(handler)
    package.setLevel(logging.INFO)


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Calls ``patch(module)`` right after ``import <name>`` has run the module, so that arming a
    zero-change hook (the ``.pth`` line) imports no framework into every Python process. The module is
    found by the other finders as usual; this finder leaves ``sys.meta_path`` once it has patched.
    A failing ``patch`` is logged and the import goes on: training runs without the hook."""

    def __init__(self, name: str, patch: Callable[[Any], None], what: str) -> None:
        self.name, self.patch, self.what = name, patch, what

    def install(self) -> None:
        sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> (
            importlib.machinery.ModuleSpec | None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target) if find is not None else None
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self)
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: Any, finder: PatchOnImport) -> None:
        self.inner, self.finder = inner, finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        self.finder.remove()
        try:
            self.finder.patch(module)
        except Exception:
            logger.exception("sdk_ext: could not arm the %s hook; training goes on without it", self.finder.what)


def run_script(module: str, install: Callable[[], object], argv: list[str] | None = None) -> None:
    """``python -m <module> SCRIPT.py [ARGS...]``: ``install()``, then run the script as ``__main__`` with
    ``sys.argv = [SCRIPT.py, ARGS...]``, exactly as ``python SCRIPT.py ARGS...`` would."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stderr.write(f"usage: python -m {module} SCRIPT.py [ARGS...]\n")
        raise SystemExit(2)
    install()
    sys.argv = list(args)
    runpy.run_path(args[0], run_name="__main__")


__all__ = ["PatchOnImport", "arm_on_import", "del_hook", "enabled", "ensure_log_output", "get_hook", "install",
           "run_script", "set_hook", "uninstall"]
