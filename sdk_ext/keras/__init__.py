"""The Keras 3 hook (``sdk_ext.keras.KerasHook``, a ``keras.callbacks.Callback``) for the torch and
TensorFlow backends; ``sdk_ext.tensorflow`` re-exports it under smdebug's import path.

Importing this package does not import Keras (the zero-change ``.pth`` line imports
``sdk_ext.keras.zero_change`` before the script picks its backend); ``KerasHook`` imports it on first use.
"""

from typing import Any

from sdk_ext import modes  # smdebug.tensorflow.modes
from sdk_ext.hooks import (
    Collection,
    CollectionKeys,
    CollectionManager,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
)
from sdk_ext.keras.zero_change import del_hook, get_hook, set_hook
from sdk_ext.modes import ModeKeys


def __getattr__(name: str) -> Any:
    if name == "KerasHook":
        from sdk_ext.keras.hook import KerasHook

        return KerasHook
    raise AttributeError(f"module 'sdk_ext.keras' has no attribute {name!r}")


__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "KerasHook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "del_hook",
    "get_hook",
    "modes",
    "set_hook",
]
