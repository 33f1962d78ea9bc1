"""smdebug's module path ``smdebug.tensorflow.session``: its TensorFlow 1 hooks, which cannot work today.

``SessionHook`` and ``EstimatorHook`` hooked ``tf.compat.v1.Session`` runs and ``tf.estimator``; TensorFlow
2.16+ has no ``tf.estimator``, and Keras 3 builds no v1 graphs. The names exist so that a ported script
fails where it creates one, saying what to use instead, rather than at import.
"""

from __future__ import annotations

from typing import Any

from sdk_ext.exceptions import ConfigError

_WHY = ("smdebug's {name} hooked TensorFlow 1 sessions and tf.estimator, which TensorFlow 2.16+ no longer has. "
        "Use sdk_ext.tensorflow.KerasHook: a Keras callback for model.fit/evaluate/predict, and "
        "hook.wrap_tape / hook.wrap_optimizer for custom training loops")


class SessionHook:
    """Refuses construction with the reason (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ConfigError(_WHY.format(name=type(self).__name__), where=f"sdk_ext.tensorflow.{type(self).__name__}")


class EstimatorHook(SessionHook):
    """Refuses construction with the reason (see the module docstring)."""


__all__ = ["EstimatorHook", "SessionHook"]
