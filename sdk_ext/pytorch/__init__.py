"""The PyTorch hook (``sdk_ext.pytorch.Hook``) and the zero-script-change entry (``get_hook``, ``del_hook``, ``zero_change``)."""

from sdk_ext import modes  # smdebug.pytorch.modes: ``hook.set_mode(smd.modes.TRAIN)``
from sdk_ext.hooks import (
    Collection,
    CollectionKeys,
    CollectionManager,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
)
from sdk_ext.modes import ModeKeys
from sdk_ext.pytorch.hook import Hook
from sdk_ext.pytorch.zero_change import del_hook, get_hook

__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "Hook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "del_hook",
    "get_hook",
    "modes",
]
