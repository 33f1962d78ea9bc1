"""Finding the inputs and outputs of activation functions in a trial, shared by DeadRelu,
SaturatedActivation and PoorWeightInitialization.

Two ways, combined:

* by name: the rules' patterns (``.*relu_output``, ``.*tanh_input|.*sigmoid_input``, ``.*relu_input``)
  match what the hooks name activations: PyTorch modules whose path says so (``relu_output_0``),
  Keras layers (the Keras hook saves ``{layer}/{function}_input`` and ``_output`` for every layer
  with a non-linear activation: ``dense/relu_output``, ``re_lu/relu_output``, ``dense_1/tanh_input``);
* by value: a module or layer whose input and output are both saved at a step, under the hooks'
  generic names (PyTorch ``{path}_input_{i}``/``{path}_output_{i}``, e.g. ``body.1_output_0`` for the
  ``nn.ReLU`` inside an ``nn.Sequential``; Keras ``{layer}/inputs``/``{layer}/outputs``), is an
  activation if the output is that function of the input, element by element: ``max(x, 0)``
  exactly (with some ``x < 0``, else it could be the identity), ``tanh(x)`` or ``sigmoid(x)``
  (to float32 rounding). What a module is does not change between steps: each pair is judged
  once, at the first step where it can be.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import tensor_names_at

_MODULE_TENSOR = re.compile(
    r"^(?P<m>.+?)(?:_(?P<k>input|output)_(?P<i>\d+)|/(?P<kk>inputs|outputs)(?:_(?P<ii>\d+))?)$"
)
#: Regexes of the generic module/layer tensor names (for trial.tensor_names(regex=...)).
MODULE_TENSOR_REGEX = [r"_(input|output)_\d+$", r"/(inputs|outputs)(_\d+)?$"]
_UNDECIDED = "?"


def module_pairs(names: Iterable[str]) -> list[tuple[str, str]]:
    """``(input name, output name)`` of every module or layer with both among ``names``."""
    sides: dict[tuple[str, str, str], dict[str, str]] = {}
    for name in names:
        m = _MODULE_TENSOR.match(name)
        if m is None:
            continue
        if m.group("k"):
            key, side = (m.group("m"), "torch", m.group("i")), m.group("k")
        else:
            key, side = (m.group("m"), "keras", m.group("ii") or ""), m.group("kk")[:-1]
        sides.setdefault(key, {})[side] = name
    return sorted((s["input"], s["output"]) for s in sides.values() if "input" in s and "output" in s)


def identify(x: np.ndarray, y: np.ndarray) -> str | None:
    """``"relu"``, ``"tanh"`` or ``"sigmoid"`` if ``y`` is that function of ``x``; None if it is none of
    them; ``"?"`` if it cannot tell yet (a ReLU whose inputs are all >= 0 looks like the identity)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.size == 0 or x.dtype.kind != "f" or y.dtype.kind != "f":
        return None
    if np.array_equal(y, np.maximum(x, 0)):
        return "relu" if bool((x < 0).any()) else _UNDECIDED
    xd = x.astype(np.float64)
    if np.allclose(y, xd, rtol=0, atol=0):
        return None
    if np.allclose(y, np.tanh(xd), rtol=1e-5, atol=1e-6):
        return "tanh"
    if np.allclose(y, 1.0 / (1.0 + np.exp(-xd)), rtol=1e-5, atol=1e-6):
        return "sigmoid"
    return None


class ActivationFinder:
    """Remembers what each module/layer pair of a trial is (see the module docstring)."""

    def __init__(self) -> None:
        self._kinds: dict[tuple[str, str], str | None] = {}

    def find(self, names_at_step: Iterable[str], value: Callable[[str], Any]) -> list[tuple[str, str, str]]:
        """``(kind, input name, output name)`` of the activations among the pairs saved at this step."""
        found = []
        for pair in module_pairs(names_at_step):
            kind = self._kinds.get(pair, _UNDECIDED)
            if kind == _UNDECIDED:
                x, y = value(pair[0]), value(pair[1])
                if x is None or y is None:
                    continue
                kind = identify(x, y)
                self._kinds[pair] = kind
            if kind is not None and kind != _UNDECIDED:
                found.append((kind, pair[0], pair[1]))
        return found


def activations_at(rule: Any, finder: ActivationFinder, step: int, kinds: Iterable[str]) -> list[tuple[str, str, str]]:
    """The activations of ``kinds`` identified by value at ``step`` (``rule`` is a BuiltinRule: its trial,
    its value lookup, and its selection, so that they count as tensors the rule looked at)."""
    pattern = re.compile("|".join(MODULE_TENSOR_REGEX))
    names = [n for n in tensor_names_at(rule.base_trial, step) if pattern.search(n)]
    if not names:
        return []
    wanted = set(kinds)
    found = [f for f in finder.find(names, lambda n: rule.value(n, step)) if f[0] in wanted]
    if found:
        rule.select(step, regex=["^" + re.escape(n) + "$" for f in found for n in f[1:]], all_if_empty=False)
    return found


__all__ = ["MODULE_TENSOR_REGEX", "ActivationFinder", "activations_at", "identify", "module_pairs"]
