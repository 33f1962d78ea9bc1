"""TensorFlow custom loops: ``tape = hook.wrap_tape(tf.GradientTape())`` (smdebug's ``wrap_tape``).

Each ``with tape:`` starts a step (unless the script drives steps itself with ``hook.step()`` /
``begin_step``); ``tape.gradient(loss, variables)`` then saves, if the step saves them, the
gradients (``gradients/{layer}/{var}Grad``), the variables' values (``{layer}/weights/...``) and a
scalar loss as ``loss``. Inside a ``tf.function`` values are symbolic: use ``hook.wrap_optimizer``
there (it captures the applied gradients in graph mode too).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from sdk_ext.hooks.collections import CollectionKeys
from sdk_ext.keras import capture

if TYPE_CHECKING:
    from sdk_ext.keras.hook import KerasHook


def wrap_tape(hook: KerasHook, tape: Any) -> Any:
    """Wrap ``tape`` (a ``tf.GradientTape``) in place; returns it."""
    push = getattr(tape, "_push_tape", None)
    gradient = tape.gradient
    if push is None or getattr(gradient, "__sdk_ext_tape__", False):
        return tape

    @functools.wraps(push)
    def push_tape(*args: Any, **kwargs: Any) -> Any:
        result = push(*args, **kwargs)
        if not hook.disabled:
            hook.begin_implicit_step()
        return result

    @functools.wraps(gradient)
    def tape_gradient(target: Any, sources: Any, *args: Any, **kwargs: Any) -> Any:
        grads = gradient(target, sources, *args, **kwargs)
        variables = capture.flatten(sources)
        flat = capture.flatten(grads) if isinstance(grads, (list, tuple, dict)) else [grads]
        if not capture.is_symbolic(target):
            if len(flat) == len(variables):
                hook.save_gradients(flat, variables)
            hook.save_weights(variables)
            if getattr(target, "shape", None) is not None and len(target.shape) == 0:
                hook.save_tensor("loss", target, collections_to_write=CollectionKeys.LOSSES)
        return grads

    tape_gradient.__sdk_ext_tape__ = True  # type: ignore[attr-defined]
    object.__setattr__(tape, "_push_tape", push_tape)
    object.__setattr__(tape, "gradient", tape_gradient)
    return tape


__all__ = ["wrap_tape"]
