"""Zero script change: a training script with no hook code gets a hook when SageMaker's config is present.

The container needs one line, run before the training script, e.g. as the entry point::

    python -m sdk_ext.pytorch.run train.py --epochs 3        # instead of: python train.py --epochs 3

or, to keep ``python train.py``, a ``.pth`` file in site-packages (executed at interpreter start)::

    echo "import sdk_ext.pytorch.zero_change as z; z.install()" > "$(python -c 'import site; print(site.getsitepackages()[0])')/sdk_ext_hook.pth"

``install()`` does nothing unless ``debughookconfig.json`` exists (``$SMDEBUG_CONFIG_FILE_PATH``,
default ``/opt/ml/input/config/debughookconfig.json``) and ``USE_SMDEBUG`` is not ``0``/``false``.
Then it adds a global module forward pre-hook that, on the first call of a module with parameters
(the model, whatever wraps it: DDP, torch.compile), creates the hook from the config and registers
the model; loss modules (``nn.modules.loss._Loss``) called outside the model are registered as
losses. The global pre-hook removes itself a few steps later. The hook is closed at exit. A bad
config is logged with its reason and training runs without the hook.

One hook per process: a script that also asks for a hook (``Hook.create_from_json_file()``,
``get_hook(create_if_not_exists=True)``, or its own ``Hook(...)``) shares it with this path, before
or after the first forward call (see :mod:`sdk_ext.hooks.registry`), and the trial gets the same
files as with either path alone. Registering the model or a loss that is registered already does
nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from sdk_ext.hooks import registry
from sdk_ext.hooks import zero_change as shared

logger = logging.getLogger(__name__)

_state: dict[str, Any] = {"failed": None, "installed": False, "path": None, "finder": None, "handle": None, "steps": 0}
_WATCH_STEPS = 3  # steps during which new loss modules are looked for


def get_hook(json_config_path: str | None = None, create_if_not_exists: bool = False) -> Any:
    """The process's PyTorch hook (smdebug's ``get_hook``): the one that exists, whoever created it, or
    (``create_if_not_exists``) a new one from the config, which then is the process's hook.

    Returns None when there is none and there is no config file, ``USE_SMDEBUG`` is off, or the
    config is invalid (logged once).
    """
    from sdk_ext.pytorch.hook import Hook

    return shared.get_hook(Hook, json_config_path, create_if_not_exists, _state)


def del_hook() -> None:
    """Forget the process's hook (smdebug's ``del_hook``): the next ``get_hook(create_if_not_exists=True)``
    creates a new one. The forgotten hook is not closed; it still closes at exit."""
    registry.forget()


def install(json_config_path: str | None = None) -> bool:
    """Arm the zero-change hook; True if a config was found. Safe to call more than once."""
    return shared.install(_state, json_config_path, _arm, what="debugger", when="at the first forward call")


def _arm(path: str) -> None:
    import torch

    def pre_hook(module: torch.nn.Module, inputs: Any) -> None:
        _on_module_call(module, path)

    _state["handle"] = torch.nn.modules.module.register_module_forward_pre_hook(pre_hook)


def _on_module_call(module: Any, path: str) -> None:
    import torch

    try:
        hook = get_hook(path, create_if_not_exists=True)
        if hook is None:
            _uninstall()
            return
        if not hook.has_model:
            if isinstance(module, torch.nn.modules.loss._Loss) or not any(True for _ in module.parameters()):
                return  # not the model
            hook.register_module(module, during_forward=True)  # this call's pre-hook ran before the registration
            return
        if hook.is_model(module):
            _state["steps"] += 1
            if _state["steps"] > _WATCH_STEPS:
                _uninstall()
            return
        if isinstance(module, torch.nn.modules.loss._Loss) and not hook.is_registered(module):
            hook.register_loss(module)
    except Exception:
        logger.exception("sdk_ext: the zero-change hook failed; training goes on without it")
        _uninstall()


def _uninstall() -> None:
    handle = _state["handle"]
    if handle is not None:
        handle.remove()
        _state["handle"] = None


def uninstall() -> None:
    """Remove the global pre-hook and close the process's hook (it is forgotten)."""
    shared.uninstall(_state, _uninstall, steps=0)


__all__ = ["del_hook", "get_hook", "install", "uninstall"]
