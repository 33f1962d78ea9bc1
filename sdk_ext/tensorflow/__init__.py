"""smdebug's import path for TensorFlow 2 users: ``import sdk_ext.tensorflow as smd; smd.KerasHook(...)``.

The same objects as :mod:`sdk_ext.keras` (Keras 3 on the TensorFlow backend, TF 2.16+), plus smdebug's
TensorFlow 1 hook names (``SessionHook``, ``EstimatorHook``), which refuse construction saying why.
Importing this package imports neither Keras nor TensorFlow; ``KerasHook`` does, on first use.
"""

from typing import Any

from sdk_ext.keras import (
    Collection,
    CollectionKeys,
    CollectionManager,
    ModeKeys,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
    del_hook,
    get_hook,
    modes,
    set_hook,
)
from sdk_ext.tensorflow.session import EstimatorHook, SessionHook


def __getattr__(name: str) -> Any:
    if name in ("KerasHook", "create_trial"):
        import sdk_ext.keras

        return getattr(sdk_ext.keras, name)
    raise AttributeError(f"module 'sdk_ext.tensorflow' has no attribute {name!r}")


__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "EstimatorHook",
    "KerasHook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "SessionHook",
    "create_trial",
    "del_hook",
    "get_hook",
    "modes",
    "set_hook",
]
