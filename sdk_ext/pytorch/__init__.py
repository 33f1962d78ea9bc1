"""The PyTorch hook (``sdk_ext.pytorch.Hook``) and the zero-script-change entry (``get_hook``, ``del_hook``, ``zero_change``).

The names of ``smdebug.pytorch``: ``Hook``, ``Collection``, ``CollectionKeys``, ``SaveConfig``,
``SaveConfigMode``, ``ReductionConfig``, ``modes``, ``create_trial``, ``get_hook``, ``set_hook``, ``del_hook``.
"""

from sdk_ext import modes  # smdebug.pytorch.modes: ``hook.set_mode(smd.modes.TRAIN)``
from sdk_ext.hooks import (
    Collection,
    CollectionKeys,
    CollectionManager,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
)
from sdk_ext.hooks.zero_change import set_hook
from sdk_ext.modes import ModeKeys
from sdk_ext.pytorch.hook import Hook
from sdk_ext.pytorch.zero_change import del_hook, get_hook
from sdk_ext.trials import create_trial

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
