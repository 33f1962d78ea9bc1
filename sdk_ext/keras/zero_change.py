"""Zero script change for Keras: ``model.fit/evaluate/predict`` get the hook from SageMaker's config.

    python -m sdk_ext.keras.run train.py --epochs 3           # instead of: python train.py --epochs 3

or keep ``python train.py`` with a ``.pth`` line in site-packages (run at interpreter start)::

    import sdk_ext.keras.zero_change as z; z.install()

``install()`` does nothing unless ``debughookconfig.json`` exists (``$SMDEBUG_CONFIG_FILE_PATH``,
default ``/opt/ml/input/config/debughookconfig.json``) and ``USE_SMDEBUG`` is not ``0``/``false``.
It does not import Keras (the script may still choose ``KERAS_BACKEND``): when the script imports
``keras``, ``keras.Model.fit``, ``evaluate`` and ``predict`` are wrapped to add the process's
:class:`~sdk_ext.keras.KerasHook` (created from the config at the first call) to ``callbacks``,
unless the script passes a KerasHook itself. A bad config is logged and training runs without it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from typing import Any

from sdk_ext.hooks import zero_change as shared

logger = logging.getLogger(__name__)

_state: dict[str, Any] = {"failed": None, "installed": False, "path": None, "patched": False, "finder": None}
_METHODS = ("fit", "evaluate", "predict")


def get_hook(json_config_path: str | None = None, create_if_not_exists: bool = False) -> Any:
    """The process's KerasHook: the existing one, or (``create_if_not_exists``) a new one from the config.
    None without a config file, with ``USE_SMDEBUG`` off, or on a bad config. (smdebug's
    ``get_hook(hook_type, ...)`` is :func:`sdk_ext.tensorflow.get_hook`.)"""
    from sdk_ext.keras.hook import KerasHook

    return shared.get_hook(KerasHook, json_config_path, create_if_not_exists, _state)


set_hook = shared.set_hook
del_hook = shared.del_hook


def install(json_config_path: str | None = None) -> bool:
    """Arm the zero-change path; True if a config was found. Safe to call more than once."""
    return shared.install(_state, json_config_path, lambda path: shared.arm_on_import(_state, "keras", _patch_keras,
                                                                                        "Keras"),
                          what="Keras", when="at the first fit/evaluate/predict")


def _with_hook(callbacks: Any, hook: Any) -> Any:
    from sdk_ext.keras.hook import KerasHook

    if callbacks is not None and not isinstance(callbacks, (list, tuple)):
        return callbacks  # Keras's own CallbackList, which fit hands to its validation evaluate(): the hook is in it
    found = list(callbacks or [])
    if not any(isinstance(cb, KerasHook) for cb in found):
        found.append(hook)
    return found


def _patch_keras(keras: Any) -> None:
    if _state["patched"]:
        return
    model_cls = keras.Model
    for method in _METHODS:
        original = getattr(model_cls, method)
        signature = inspect.signature(original)

        def make(original: Any, signature: inspect.Signature) -> Any:
            @functools.wraps(original)
            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    hook = get_hook(json_config_path=_state["path"], create_if_not_exists=True)
                    if hook is not None:
                        bound = signature.bind(self, *args, **kwargs)
                        bound.arguments["callbacks"] = _with_hook(bound.arguments.get("callbacks"), hook)
                        args, kwargs = bound.args[1:], bound.kwargs
                except Exception:
                    logger.exception("sdk_ext: the zero-change Keras hook failed; training goes on without it")
                return original(self, *args, **kwargs)

            call.__sdk_ext_original__ = original  # type: ignore[attr-defined]
            return call

        setattr(model_cls, method, make(original, signature))
    _state["patched"] = True


def uninstall() -> None:
    """Undo :func:`install`: remove the import hook and the wrappers, close and forget the hook."""

    def restore() -> None:
        keras = sys.modules.get("keras")
        if keras is not None and _state["patched"]:
            for method in _METHODS:
                current = getattr(keras.Model, method)
                original = getattr(current, "__sdk_ext_original__", None)
                if original is not None:
                    setattr(keras.Model, method, original)

    shared.uninstall(_state, restore, patched=False)


__all__ = ["del_hook", "get_hook", "install", "set_hook", "uninstall"]
