"""The Keras 3 hook (``sdk_ext.keras.KerasHook``, a ``keras.callbacks.Callback``) for the torch and
TensorFlow backends; ``sdk_ext.tensorflow`` re-exports it under smdebug's import path."""

from sdk_ext import modes  # smdebug.tensorflow.modes
from sdk_ext.hooks import (
    Collection,
    CollectionKeys,
    CollectionManager,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
)
from sdk_ext.keras.hook import KerasHook
from sdk_ext.keras.zero_change import get_hook
from sdk_ext.modes import ModeKeys

__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "KerasHook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "get_hook",
    "modes",
]
