"""Capturing what Keras does not hand to callbacks: the gradients an optimizer applies, and the
inputs/outputs of layers.

Gradients (:class:`GradientTap`): ``optimizer.apply(grads, variables)`` is wrapped on the optimizer
object; every backend but JAX calls it from ``fit`` (``apply_gradients`` calls it too). On a step
that saves gradients the tap is *armed*:

* eager (torch backend, TensorFlow with ``run_eagerly=True``, custom loops): the wrapper keeps the
  gradient tensors (torch: a copy, since ``.grad`` buffers are reused) and the hook reads them after
  the step;
* inside a ``tf.function`` (graph mode, ``jit_compile=True``): the wrapper adds
  ``tf.cond(armed, copy into stash variables, no-op)`` to the graph. The stash variables are
  created once (``tf.init_scope``) with each variable's shape; the flag is a ``tf.Variable``
  assigned only when it changes. A step that saves nothing runs the no-op branch: no copy, no
  host transfer.

These are the gradients the optimizer applies: for plain SGD, ``w_after = w_before - lr * g``.

Layers (:class:`LayerRecorder`): each layer's ``call`` is wrapped; while armed and running eagerly
it keeps the layer's inputs and outputs (first call per step). In graph mode the hook runs the
steps that save layer tensors eagerly (see :mod:`sdk_ext.keras.hook`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from sdk_ext.hooks.tensors import to_numpy as shared_to_numpy

logger = logging.getLogger(__name__)

_WRAPPED = "_sdk_ext_original"


def backend_name() -> str:
    import keras

    return str(keras.backend.backend())


def to_numpy(value: Any) -> np.ndarray[Any, Any]:
    """A backend tensor, Keras variable, or anything numpy accepts, as a numpy array."""
    inner = getattr(value, "value", None)
    if inner is not None and not callable(inner) and type(value).__name__ in ("Variable", "KerasVariable"):
        value = inner
    if not type(value).__module__.startswith("torch") and hasattr(value, "numpy") and callable(value.numpy):
        value = value.numpy()  # TensorFlow, JAX
    return shared_to_numpy(value)


def flatten(value: Any) -> list[Any]:
    """The tensors of a (nested) tuple/list/dict, depth first; None skipped."""
    if value is None:
        return []
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in flatten(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in flatten(item)]
    return [value]


def is_symbolic(value: Any) -> bool:
    """True for graph tensors (inside tf.function) and Keras symbolic tensors: nothing to read."""
    name = type(value).__name__
    if name in ("KerasTensor", "SymbolicTensor"):
        return True
    if type(value).__module__.startswith("tensorflow"):
        import tensorflow as tf

        return not tf.executing_eagerly()
    if type(value).__module__.startswith("torch"):
        return bool(getattr(value, "is_meta", False))
    return False


def detached(value: Any) -> Any:
    if type(value).__module__.startswith("torch"):
        return value.detach().clone()
    return value


class GradientTap:
    """Keeps the gradients an optimizer applies on armed steps (see the module docstring)."""

    def __init__(self) -> None:
        self.armed = False
        self._eager: list[tuple[Any, Any]] = []
        self._stash: dict[int, tuple[Any, Any]] = {}  # id(variable) -> (variable, stash tf.Variable)
        self._flag: Any = None  # tf.Variable(bool), created on the first graph trace
        self._flag_value = False  # what _flag holds (assigned only on change)
        #: True once a compiled (tf.function) step went through the stash.
        self.graph_used = False
        #: The optimizers wrapped, in order.
        self.optimizers: list[Any] = []

    # --- wrapping --------------------------------------------------------------------------------

    def wrap(self, optimizer: Any) -> Any:
        """Wrap ``optimizer.apply`` (once per optimizer object); returns the optimizer."""
        apply = getattr(optimizer, "apply", None)
        if apply is None or getattr(apply, _WRAPPED, None) is not None:
            return optimizer
        tap = self

        @functools.wraps(apply)
        def wrapped(grads: Any, trainable_variables: Any = None, *args: Any, **kwargs: Any) -> Any:
            variables = trainable_variables
            if variables is None:
                variables = getattr(optimizer, "_trainable_variables", None) or []
            tap.record(list(grads), list(variables))
            return apply(grads, trainable_variables, *args, **kwargs)

        setattr(wrapped, _WRAPPED, apply)
        object.__setattr__(optimizer, "apply", wrapped)
        self.optimizers.append(optimizer)
        return optimizer

    def unwrap(self) -> None:
        for optimizer in self.optimizers:
            if getattr(optimizer.__dict__.get("apply"), _WRAPPED, None) is not None:
                object.__delattr__(optimizer, "apply")
        self.optimizers.clear()

    # --- per step --------------------------------------------------------------------------------

    def arm(self, on: bool) -> None:
        self.armed = on
        if not on:
            self._eager.clear()
        if self._flag is not None and bool(self._flag_value) != on:
            self._flag.assign(on)
            self._flag_value = on

    def record(self, grads: list[Any], variables: list[Any]) -> None:
        pairs = [(v, g) for g, v in zip(grads, variables) if g is not None]
        if not pairs:
            return
        if is_symbolic(pairs[0][1]):
            self._record_graph(pairs)
        elif self.armed:
            self._eager.extend((v, detached(g)) for v, g in pairs)

    def _record_graph(self, pairs: list[tuple[Any, Any]]) -> None:
        import tensorflow as tf

        with tf.init_scope():  # created once, outside the function being traced
            if self._flag is None:
                self._flag = tf.Variable(self.armed, trainable=False, name="sdk_ext_armed")
                self._flag_value = self.armed
            for v, g in pairs:
                if id(v) not in self._stash:
                    stash = tf.Variable(tf.zeros(tuple(v.shape), dtype=g.dtype), trainable=False,
                                        name="sdk_ext_gradient")
                    self._stash[id(v)] = (v, stash)
        self.graph_used = True
        stashes = [(self._stash[id(v)][1], g) for v, g in pairs]

        def copy() -> Any:
            for stash, g in stashes:
                stash.assign(tf.convert_to_tensor(g))
            return tf.constant(True)

        tf.cond(self._flag.read_value(), copy, lambda: tf.constant(False))

    def stashed(self) -> list[tuple[Any, Any]]:
        """(variable, stash variable) pairs of compiled steps (what the stash holds now)."""
        return list(self._stash.values())

    def taken(self) -> Iterator[tuple[Any, Any]]:
        """(variable, gradient) pairs of the armed step that just ran."""
        if not self.armed:
            return
        if self._eager:
            yield from self._eager
        elif self.graph_used:
            yield from self._stash.values()


class LayerRecorder:
    """Keeps layers' inputs and outputs, and their activations' inputs and outputs, on armed eager steps.

    A layer with a non-linear ``activation`` (``Dense(8, activation="relu")``, ``Activation("tanh")``)
    or an activation layer (``ReLU``, ``Softmax``...) also gets ``{layer}/{function}_input`` and
    ``{layer}/{function}_output`` (``dense/relu_output``): the activation rules' default patterns
    (``.*relu_output``, ``.*tanh_input``) and SageMaker's rule collection configs then find them.
    """

    def __init__(self) -> None:
        self.armed = False
        self.values: dict[str, tuple[list[Any], list[Any]]] = {}
        self._wrapped: list[tuple[Any, str]] = []

    def arm(self, on: bool) -> None:
        self.armed = on
        self.values.clear()

    def candidates(self, layer: Any) -> dict[str, list[str]]:
        """``{record key: [tensor name bases]}`` the layer can produce."""
        name = layer.name
        found = {name: [f"{name}/inputs", f"{name}/outputs"]}
        act = activation_name(layer)
        if act is not None:
            found[f"{name}/{act}"] = [f"{name}/{act}_input", f"{name}/{act}_output"]
        return found

    def wrap_layer(self, layer: Any, name: str) -> None:
        call = getattr(layer, "call", None)
        if call is None or getattr(call, _WRAPPED, None) is not None:
            return
        recorder = self
        act = activation_name(layer)
        fn = getattr(layer, "activation", None)
        fused = act is not None and callable(fn) and getattr(fn, _WRAPPED, None) is None

        @functools.wraps(call)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            outputs = call(*args, **kwargs)
            if recorder.armed and name not in recorder.values:
                inputs = args[:1] if args else list(kwargs.values())[:1]
                recorder._keep(name, inputs, outputs)
                if act is not None and not fused:  # an activation layer: its call is the activation
                    recorder._keep(f"{name}/{act}", inputs, outputs)
            return outputs

        setattr(wrapped, _WRAPPED, call)
        object.__setattr__(layer, "call", wrapped)
        self._wrapped.append((layer, "call"))
        if fused and fn is not None:
            key = f"{name}/{act}"

            @functools.wraps(fn)
            def activation(x: Any, *args: Any, **kwargs: Any) -> Any:
                y = fn(x, *args, **kwargs)
                if recorder.armed and key not in recorder.values:
                    recorder._keep(key, x, y)
                return y

            setattr(activation, _WRAPPED, fn)
            object.__setattr__(layer, "activation", activation)
            self._wrapped.append((layer, "activation"))

    def _keep(self, name: str, inputs: Any, outputs: Any) -> None:
        ins, outs = flatten(inputs), flatten(outputs)
        if any(is_symbolic(t) for t in ins + outs):
            return
        self.values[name] = ([detached(t) for t in ins], [detached(t) for t in outs])

    def unwrap(self) -> None:
        for layer, attr in self._wrapped:
            if getattr(layer.__dict__.get(attr), _WRAPPED, None) is not None:
                object.__delattr__(layer, attr)
        self._wrapped.clear()


_ACTIVATION_LAYERS = {"ReLU": "relu", "Softmax": "softmax", "ELU": "elu", "LeakyReLU": "leaky_relu", "PReLU": "prelu"}


def activation_name(layer: Any) -> str | None:
    """The non-linear activation a layer applies (``relu``, ``tanh``, ``sigmoid``...), or None."""
    fn = getattr(layer, "activation", None)
    if callable(fn):
        fn = getattr(fn, _WRAPPED, fn)
        name = getattr(fn, "__name__", None)
        if isinstance(name, str) and name not in ("linear", "<lambda>"):
            return name
        return None
    return _ACTIVATION_LAYERS.get(type(layer).__name__)


def wrap_method(obj: Any, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Replace ``obj.attr`` by ``make(original)`` on the instance (once); True if wrapped now."""
    original = getattr(obj, attr, None)
    if original is None or getattr(original, _WRAPPED, None) is not None:
        return False
    wrapped = functools.wraps(original)(make(original))
    setattr(wrapped, _WRAPPED, original)
    object.__setattr__(obj, attr, wrapped)
    return True


def unwrap_method(obj: Any, attr: str) -> None:
    if getattr(obj.__dict__.get(attr), _WRAPPED, None) is not None:
        object.__delattr__(obj, attr)


__all__ = [
    "GradientTap", "LayerRecorder", "activation_name", "backend_name", "detached", "flatten", "is_symbolic", "to_numpy", "unwrap_method",
    "wrap_method",
]
