"""The XGBoost hook (``sdk_ext.xgboost.Hook``, a ``TrainingCallback``) and the zero-script-change entry
(``get_hook``, :mod:`sdk_ext.xgboost.zero_change`, ``python -m sdk_ext.xgboost.run``).

Needs the ``xgboost`` extra (``pip install 'sdk-ext[xgboost]'``, which installs ``xgboost-cpu``). ``Hook``
is imported on first use, so the zero-change ``.pth`` line (which imports this package) does not import
xgboost into every Python process.
"""

from typing import Any

from sdk_ext import modes
from sdk_ext.hooks import (
    Collection,
    CollectionKeys,
    CollectionManager,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
)
from sdk_ext.modes import ModeKeys
from sdk_ext.xgboost.zero_change import del_hook, get_hook, set_hook


def __getattr__(name: str) -> Any:
    if name == "Hook":
        from sdk_ext.xgboost.hook import Hook

        return Hook
    if name == "create_trial":  # smdebug.xgboost.create_trial
        from sdk_ext.trials import create_trial

        return create_trial
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "Hook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "create_trial",
    "del_hook",
    "get_hook",
    "modes",
    "set_hook",
]
