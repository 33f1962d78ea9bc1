"""smdebug's import path for TensorFlow 2 users: ``import sdk_ext.tensorflow as smd; smd.KerasHook(...)``.

The same objects as :mod:`sdk_ext.keras` (Keras 3 on the TensorFlow backend, TF 2.12+), plus the names of
``smdebug.tensorflow``: ``get_hook(hook_type, json_config_path, create_if_not_exists)``, ``set_hook``,
``del_hook``, ``create_trial``. TF1's ``SessionHook``/``EstimatorHook`` are not provided (TensorFlow 2.16+
trains with Keras).
"""

from __future__ import annotations

import logging
from typing import Any

from sdk_ext.hooks.zero_change import del_hook, set_hook
from sdk_ext.keras import (
    Collection,
    CollectionKeys,
    CollectionManager,
    KerasHook,
    ModeKeys,
    ReductionConfig,
    SaveConfig,
    SaveConfigMode,
    modes,
)
from sdk_ext.keras import get_hook as _keras_get_hook
from sdk_ext.trials import create_trial

logger = logging.getLogger(__name__)

_HOOK_TYPES = ("keras", "session", "estimator")


def get_hook(hook_type: str | None = None, json_config_path: str | None = None,
             create_if_not_exists: bool = False) -> Any:
    """The process's hook, smdebug's ``smdebug.tensorflow.get_hook``.

    ``hook_type`` ``"keras"`` (or None) asks for the :class:`KerasHook`: the existing one, or with
    ``create_if_not_exists`` a new one (a KerasHook also for None, where smdebug raised) from the SageMaker config (``json_config_path``, else
    ``$SMDEBUG_CONFIG_FILE_PATH``, else the default path). Returns None when there is none to return.
    ``"session"``/``"estimator"`` (TF1 hooks) log an error saying so and return None, as smdebug's
    ``get_hook`` returns None for a hook it cannot make.
    """
    if hook_type is not None and hook_type not in _HOOK_TYPES:
        logger.error("get_hook(hook_type=%r): use 'keras' (or None); smdebug's types are %s", hook_type,
                     ", ".join(_HOOK_TYPES))
        return None
    if hook_type in ("session", "estimator"):
        logger.error("get_hook(%r): TF1 SessionHook/EstimatorHook are not provided by sdk_ext (TensorFlow 2.16+ "
                     "trains with Keras); use get_hook('keras') or KerasHook", hook_type)
        return None
    return _keras_get_hook(json_config_path=json_config_path, create_if_not_exists=create_if_not_exists)


__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "KerasHook",
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
