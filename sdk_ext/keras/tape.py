"""TensorFlow custom loops: ``tape = hook.wrap_tape(tf.GradientTape())`` (smdebug's ``wrap_tape``).

Each ``with tape:`` starts a TRAIN step (unless the script drives steps itself with ``hook.step()`` /
``begin_step``), as in smdebug, whose ``wrap_tape`` set the TRAIN mode; ``tape.gradient(loss, variables)`` then saves, if the step saves them, the
gradients (``gradients/{layer}/{var}Grad``), the variables' values (``{layer}/weights/...``) and a
scalar loss as ``loss``. Inside a ``tf.function`` values are symbolic: use ``hook.wrap_optimizer``
there (it captures the applied gradients in graph mode too).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from sdk_ext.hooks.collections import CollectionKeys
from sdk_ext.keras import capture
from sdk_ext.modes import ModeKeys

if TYPE_CHECKING:
    from sdk_ext.keras.hook import KerasHook

logger = logging.getLogger(__name__)


def wrap_tape(hook: KerasHook, tape: Any) -> Any:
    """Wrap ``tape`` (a ``tf.GradientTape``) in place; returns it."""
    push = getattr(tape, "_push_tape", None)
    gradient = tape.gradient
    if push is None:
        logger.warning("sdk_ext wrap_tape: %s is not a tf.GradientTape; its steps and gradients are not saved",
                       type(tape).__name__)
        return tape
    hook.set_mode(ModeKeys.TRAIN)
    if getattr(gradient, "__sdk_ext_tape__", False):
        return tape

    @functools.wraps(push)
    def push_tape(*args: Any, **kwargs: Any) -> Any:
        result = push(*args, **kwargs)
        if hook.disabled:
            return result
        if _executing_eagerly():
            hook.begin_implicit_step()
        elif not hook.graph_tape_warned:  # traced once, not run per step: no step to begin
            hook.graph_tape_warned = True
            logger.warning(
                "sdk_ext wrap_tape: the tape is used inside a tf.function, where it runs only while the function "
                "is traced: its blocks are not steps and its tensors are symbolic. Mark the steps with "
                "`with hook.step():` around each call of the function; hook.wrap_optimizer(optimizer) saves the "
                "gradients there.")
        return result

    @functools.wraps(gradient)
    def tape_gradient(target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        grads = gradient(target, sources, *args, **kwargs)
        variables = capture.flatten(sources)
        flat = _flatten_like(grads)
        if not capture.is_symbolic(target):
            if len(flat) == len(variables):  # None for a source without a gradient keeps the pairs aligned
                hook.save_gradients(flat, variables)
            hook.save_weights(variables)
            if getattr(target, "shape", None) is not None and len(target.shape) == 0:
                hook.save_tensor("loss", target, collections_to_write=CollectionKeys.LOSSES)
        return grads

    tape_gradient.__sdk_ext_tape__ = True  # type: ignore[attr-defined]
    object.__setattr__(tape, "_push_tape", push_tape)
    object.__setattr__(tape, "gradient", tape_gradient)
    return tape


def _executing_eagerly() -> bool:
    import tensorflow as tf

    return bool(tf.executing_eagerly())


def _flatten_like(grads: Any) -> list[Any]:
    """``tape.gradient``'s result flattened as its sources are, None (no gradient) kept in its place."""
    if isinstance(grads, (list, tuple)):
        return [g for item in grads for g in _flatten_like(item)]
    if isinstance(grads, dict):
        return [g for item in grads.values() for g in _flatten_like(item)]
    return [grads]


__all__ = ["wrap_tape"]
