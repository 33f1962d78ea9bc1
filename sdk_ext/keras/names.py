"""smdebug's TF2 tensor names for Keras 3 objects, and the Keras hook's built-in collections.

Names (as smdebug's KerasHook wrote them for TF 2.x):

* weights and biases: ``{layer}/weights/{layer}/{variable}:0`` (``dense/weights/dense/kernel:0``)
* gradients: ``gradients/{layer}/{variable}Grad`` (``gradients/dense/kernelGrad``)
* layer tensors: ``{layer}/inputs`` and ``{layer}/outputs`` (``_{i}`` appended when a layer takes or
  returns several tensors)
* activations: ``{layer}/{function}_input`` and ``{layer}/{function}_output`` for a layer with a
  non-linear activation or an activation layer (``dense/relu_output``, ``re_lu/relu_output``), in
  ``layers``; the activation rules' default patterns match them
* model tensors: ``inputs`` (``inputs_{i}``), ``labels``, ``predictions``
* losses and metrics: the keys Keras logs (``loss``, ``accuracy``, ``val_loss``...)
* optimizer variables: ``{optimizer variable path}:0`` (``sgd/iteration:0``)

``{layer}/{variable}`` is a Keras 3 variable's ``path`` without the model's name in front
(``sequential/dense/kernel`` -> ``dense/kernel``); a variable of a nested model keeps the inner
model's name (``encoder/dense/kernel``). Without a model (a custom loop that did not call
``hook.register_model``), the first of three or more path parts is taken for the model's name.
"""

from __future__ import annotations

import re
from typing import Any

from sdk_ext.hooks.collections import CollectionKeys

GRADIENTS_PREFIX = "gradients/"

#: Built-in collections of the Keras hook and their regexes (metrics and optimizer variables are
#: filled by name as the hook sees them).
KERAS_COLLECTIONS: dict[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.WEIGHTS: (r"^(?!gradients/).+/weights/(?!.*bias:0$)",),
    CollectionKeys.BIASES: (r"^(?!gradients/).+/weights/.*bias:0$",),
    CollectionKeys.GRADIENTS: (r"^gradients/",),
    CollectionKeys.LOSSES: (r"(^|_)loss$",),
    CollectionKeys.METRICS: (),
    CollectionKeys.SM_METRICS: (),
    CollectionKeys.OPTIMIZER_VARIABLES: (),
    CollectionKeys.INPUTS: (r"^inputs(_\d+)?$",),
    CollectionKeys.OUTPUTS: (r"^(labels|predictions)(_\d+)?$",),
    CollectionKeys.LAYERS: (r"^(?!gradients/).+/(inputs|outputs)(_\d+)?$", r"^(?!gradients/).+/\w+_(input|output)(_\d+)?$"),
}

LOSS_REGEX = re.compile(KERAS_COLLECTIONS[CollectionKeys.LOSSES][0])


def variable_key(variable: Any, model_name: str | None = None) -> str:
    """``{layer}/{variable}`` of a Keras 3 variable (or a ``tf.Variable``: its name without ``:0``)."""
    path = getattr(variable, "path", None)
    if not isinstance(path, str) or not path:
        path = str(getattr(variable, "name", "variable")).split(":")[0]
    if path.count("/") < 2:
        return path
    if model_name:
        return path[len(model_name) + 1 :] if path.startswith(model_name + "/") else path
    return path.split("/", 1)[1]  # no model known: a model variable's path starts with the model's name


def is_rng_state(variable: Any) -> bool:
    """A Keras 3 random generator's state (``seed_generator_state``, e.g. a Dropout layer's): a variable of
    ``model.variables`` that Keras does not count among ``model.weights``, so never saved as a weight."""
    path = getattr(variable, "path", None)
    if not isinstance(path, str):
        path = str(getattr(variable, "name", "")).split(":")[0]
    return path.rpartition("/")[2] == "seed_generator_state"


def weight_name(key: str) -> str:
    layer, _, var = key.rpartition("/")
    if not layer:
        return f"{var}/weights/{var}:0"
    return f"{layer}/weights/{layer}/{var}:0"


def gradient_name(key: str) -> str:
    return f"{GRADIENTS_PREFIX}{key}Grad"


def optimizer_state(optimizer: Any) -> list[Any]:
    """The variables of ``optimizer`` that are its own state (``iteration``, ``learning_rate``, a loss scale),
    without the slots it keeps per model variable (Adam's m and v: together as large as the model).

    smdebug's ``optimizer_variables`` were the optimizer's scalars (tf.keras 2's iterations and
    hyperparameters); a Keras 3 slot is named after the variable it shadows (``{variable path with _}_{slot}``).
    """
    shadowed = [v.path.replace("/", "_") + "_" for v in getattr(optimizer, "_trainable_variables", None) or ()
                if isinstance(getattr(v, "path", None), str)]
    own = []
    for var in getattr(optimizer, "variables", None) or ():
        name = str(getattr(var, "name", ""))
        if not any(name.startswith(prefix) for prefix in shadowed):
            own.append(var)
    return own


def optimizer_variable_name(variable: Any) -> str:
    path = getattr(variable, "path", None) or str(getattr(variable, "name", "variable")).split(":")[0]
    return f"{path}:0"


def tensor_names(base: str, count: int) -> list[str]:
    """``[base]`` for one tensor, ``[base_0, base_1, ...]`` for several."""
    return [base] if count == 1 else [f"{base}_{i}" for i in range(count)]


__all__ = [
    "GRADIENTS_PREFIX",
    "KERAS_COLLECTIONS",
    "LOSS_REGEX",
    "gradient_name",
    "is_rng_state",
    "optimizer_state",
    "optimizer_variable_name",
    "tensor_names",
    "variable_key",
    "weight_name",
]
