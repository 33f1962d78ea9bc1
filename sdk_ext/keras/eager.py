"""Eager steps in graph mode: a TensorFlow model compiled into a ``tf.function`` (optionally XLA) hands
callbacks nothing but its logs; layer and model tensors exist only inside the graph. For a step that saves
them, :class:`EagerSteps` swaps the model's compiled ``train_function`` / ``test_function`` /
``predict_function`` for an eager one built by Keras itself (``run_eagerly=True``, same ``train_step``,
same maths) and swaps it back after the step. Other steps keep the compiled function.
"""

from __future__ import annotations

from typing import Any

from sdk_ext.modes import ModeKeys

FUNCTIONS = {
    ModeKeys.TRAIN: ("train_function", "make_train_function"),
    ModeKeys.EVAL: ("test_function", "make_test_function"),
    ModeKeys.PREDICT: ("predict_function", "make_predict_function"),
}


class EagerSteps:
    """Swaps a compiled Keras function for an eager one for one step at a time."""

    def __init__(self) -> None:
        self._functions: dict[ModeKeys, Any] = {}
        self._swapped: tuple[Any, str, Any] | None = None  # (model, attribute, compiled function)
        #: Steps run eagerly, by function (train/test/predict).
        self.counts: dict[str, int] = {}

    def forget(self) -> None:
        """A new model: the eager functions built for the last one are dropped."""
        self._functions.clear()

    def swap(self, model: Any, mode: ModeKeys) -> None:
        """Run the next call of ``model``'s function for ``mode`` eagerly (nothing if it runs eagerly already)."""
        if model is None or model.run_eagerly or mode not in FUNCTIONS:
            return
        attr, make = FUNCTIONS[mode]
        compiled = getattr(model, attr, None)
        if compiled is None:
            return
        eager = self._functions.get(mode)
        if eager is None:
            jit = model.jit_compile
            try:
                model.jit_compile = False
                model.run_eagerly = True
                getattr(model, make)(force=True)
                eager = getattr(model, attr)
            finally:
                model.run_eagerly = False
                model.jit_compile = jit
                setattr(model, attr, compiled)
            if eager is None or eager is compiled:
                return
            self._functions[mode] = eager
        self._swapped = (model, attr, compiled)
        setattr(model, attr, eager)
        kind = attr.split("_")[0]
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def restore(self) -> None:
        """Put the compiled function back (after the step)."""
        if self._swapped is not None:
            model, attr, compiled = self._swapped
            setattr(model, attr, compiled)
        self._swapped = None


__all__ = ["FUNCTIONS", "EagerSteps"]
