"""smdebug's import path for TensorFlow 2 users: ``import sdk_ext.tensorflow as smd; smd.KerasHook(...)``.

The same objects as :mod:`sdk_ext.keras` (Keras 3 on the TensorFlow backend, TF 2.12+).
"""

from sdk_ext.keras import (
    Collection,
    CollectionKeys,
    CollectionManager,
    KerasHook,
    ModeKeys,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
    get_hook,
    modes,
)

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
