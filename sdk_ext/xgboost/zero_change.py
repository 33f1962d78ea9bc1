"""Zero script change for XGBoost: a script that calls ``xgb.train`` or an sklearn estimator's ``fit``
with no hook code gets the hook when SageMaker's config is present.

One line before the training script, as for PyTorch::

    python -m sdk_ext.xgboost.run train.py --num-round 50      # instead of: python train.py --num-round 50

or, to keep ``python train.py``, a ``.pth`` file in site-packages (run at interpreter start; it imports
nothing heavy: xgboost is patched when the script imports it)::

    echo "import sdk_ext.xgboost.zero_change as z; z.install()" > "$(python -c 'import site; print(site.getsitepackages()[0])')/sdk_ext_xgboost_hook.pth"

``install()`` does nothing unless ``debughookconfig.json`` exists (``$SMDEBUG_CONFIG_FILE_PATH``,
default ``/opt/ml/input/config/debughookconfig.json``) and ``USE_SMDEBUG`` is not ``0``/``false``.
Then ``xgboost.train`` (also as the sklearn estimators call it) gets the process's hook appended to
its callbacks, created from the config at the first call. What the call tells about the training
fills what the config cannot: the hook's ``hyperparameters`` (the params), ``train_data`` (the
training DMatrix, for SHAP) and ``validation_data`` (the last evaluation set that is not the
training data, for predictions and labels), each only when the hook has none. A hook already in
the callbacks (the script's own) is not added twice. A bad config is logged with its reason and
training runs without the hook.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Sequence
from typing import Any

from sdk_ext.hooks import zero_change as shared

logger = logging.getLogger(__name__)

_state: dict[str, Any] = {"failed": None, "installed": False, "path": None, "patched": [], "finder": None}
_PATCH_TARGETS = ("xgboost", "xgboost.training", "xgboost.sklearn")  # modules holding a `train` name


def get_hook(json_config_path: str | None = None, create_if_not_exists: bool = True) -> Any:
    """The process's XGBoost hook (smdebug's ``get_hook``): the one that exists, whoever created it, or
    (unless ``create_if_not_exists`` is False) a new one from the config, which then is the process's
    hook. smdebug's XGBoost ``get_hook(json_config_path)`` always created one.

    Returns None when there is none and there is no config file, ``USE_SMDEBUG`` is off, or the
    config is invalid (logged once).
    """
    from sdk_ext.xgboost.hook import Hook

    return shared.get_hook(Hook, json_config_path, create_if_not_exists, _state)


set_hook = shared.set_hook  # smdebug.xgboost.set_hook
del_hook = shared.del_hook  # smdebug.xgboost.del_hook


def install(json_config_path: str | None = None) -> bool:
    """Arm the zero-change hook; True if a config was found. Safe to call more than once."""
    return shared.install(_state, json_config_path,
                          lambda path: shared.arm_on_import(_state, "xgboost", lambda module: _patch(), "XGBoost"),
                          what="XGBoost debugger", when="at the first training")


def uninstall() -> None:
    """Undo :func:`install`: restore ``train``, close the process's hook (it is forgotten)."""

    def restore() -> None:
        for module, original in _state["patched"]:
            setattr(module, "train", original)  # noqa: B010

    shared.uninstall(_state, restore, patched=[])


def _patch() -> None:
    """Wrap ``train`` where xgboost and its sklearn module look it up."""
    if _state["patched"]:
        return
    from xgboost import training

    original = training.train
    wrapped = _wrap_train(original)
    for name in _PATCH_TARGETS:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "train", None) is original:
            _state["patched"].append((module, original))
            setattr(module, "train", wrapped)  # noqa: B010 - a module attribute mypy does not know


def _wrap_train(original: Any) -> Any:
    @functools.wraps(original)
    def train(params: Any, dtrain: Any, *args: Any, **kwargs: Any) -> Any:
        callbacks = kwargs.get("callbacks")
        hook = _hook_for(params, dtrain, kwargs.get("evals"), callbacks)
        if hook is not None:
            kwargs["callbacks"] = [*(callbacks or ()), hook]
        return original(params, dtrain, *args, **kwargs)

    train.__sdk_ext_wrapped__ = True  # type: ignore[attr-defined]
    return train


def _hook_for(params: Any, dtrain: Any, evals: Sequence[Any] | None, callbacks: Any) -> Any:
    """The hook to append for this training call, or None (none configured, or it is there already)."""
    from sdk_ext.xgboost.hook import Hook

    try:
        if any(isinstance(c, Hook) for c in callbacks or ()):
            return None
        hook = get_hook(_state["path"], create_if_not_exists=True)
        if hook is None or hook.disabled:
            return None
        if hook.hyperparameters is None and isinstance(params, dict):
            hook.set_hyperparameters(params)
        if hook.train_data is None:
            hook.train_data = dtrain
        if hook.validation_data is None:
            others = [d for d, _name in (evals or ()) if d is not dtrain]
            if others:
                hook.validation_data = others[-1]
        return hook
    except Exception:
        logger.exception("sdk_ext: the zero-change XGBoost hook failed; training goes on without it")
        return None


__all__ = ["del_hook", "get_hook", "install", "set_hook", "uninstall"]
