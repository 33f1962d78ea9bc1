"""smdebug's extension points of the PyTorch hook, for code that subclasses it.

Users of smdebug subclass its hook to save what the built-in collections do not: the gradient of an
input image, activations of chosen modules, BatchNorm running statistics (SageMaker's class
activation map and pruning examples)::

    class CustomHook(sdk_ext.pytorch.Hook):
        def image_gradients(self, image):
            image.register_hook(self.backward_hook("image"))        # saved as "gradient/image"

        def forward_hook(self, module, inputs, outputs):            # after every registered module's forward
            name = module._module_name                               # (or self.module_maps[module])
            self._write_inputs(name, inputs)                         # "{name}_input_{i}"
            outputs.register_hook(self.backward_hook(name + "_output"))
            self._write_outputs(name, outputs)                       # "{name}_output_{i}"
            self.last_saved_step = self.step

What is called when, as in smdebug 1.0.34:

* ``forward_pre_hook(module, inputs)``: before each forward of the registered model; it starts the step.
* ``forward_hook(module, inputs, outputs)``: after each forward of the model, of each of its submodules
  and of each registered loss, at every step; the default saves the module's inputs and outputs when
  the step saves them. Overriding it (or ``_write_inputs``/``_write_outputs``) replaces that default:
  module tensors are then saved by the override's ``_write_*`` calls, as in smdebug.
* ``backward_hook(tname)``: returns the function to give ``tensor.register_hook``; it saves the gradient
  as ``gradient/{tname}`` when the step saves that name. The hook registers it on every parameter that
  requires grad when an override exists (``{ModelClass}_{param}``); otherwise parameters' gradients
  are captured only during saved steps (cheaper; the same tensors).
* ``_write_inputs(name, value)`` / ``_write_outputs(name, value)``: save each tensor in ``value`` (a
  tensor, or nested tuples/lists/dicts of them) as ``{name}_input_{i}`` / ``{name}_output_{i}``, ``i``
  counting on across calls within a step, when the step saves that name (an included collection
  matches it). Outside a saved step they do nothing.

``hook.step`` is the current global step (an int), ``hook.mode`` the mode, ``last_saved_step`` the
last step that saved something (or what the subclass sets), ``module_maps`` module -> name, ``module_set``
the registered modules.

A subclass that overrides one of smdebug's internals that this hook never calls (its writers, its
collection bookkeeping, its profiler callbacks: :data:`NOT_HONOURED`) gets SMDebugNotImplementedError at
construction, naming the method and what to override instead: an override that would silently never
run is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sdk_ext.exceptions import SMDebugNotImplementedError
from sdk_ext.hooks.step_lifecycle import guarded

if TYPE_CHECKING:
    import torch
    from torch import nn

    from sdk_ext.hooks.collections import Collection
    from sdk_ext.hooks.step_lifecycle import StepNumber

#: Extension points a subclass may override; each is called exactly where smdebug calls it.
HONOURED = frozenset({"forward_pre_hook", "forward_hook", "backward_hook", "_write_inputs", "_write_outputs"})
#: Overriding one of these means the module tensors are saved by the subclass's code.
CUSTOM_MODULE_PATH = frozenset({"forward_hook", "_write_inputs", "_write_outputs"})

_WRITERS = "sdk_ext writes every tensor through its own writer"
_COLLS = "sdk_ext's save policy decides what each step saves"
_PROFILER = "sdk_ext's profiler does not call the hook's timeline callbacks"
#: smdebug internals sdk_ext's hook never calls: an override would never run, so it is refused.
NOT_HONOURED: Mapping[str, str] = MappingProxyType({
    "_write": _WRITERS, "_write_for_tensor": _WRITERS, "_write_raw_tensor": _WRITERS,
    "_write_reductions": _WRITERS, "_write_shape": _WRITERS, "_write_histogram_summary": _WRITERS,
    "_write_scalar_summary": _WRITERS, "_save_for_tensor": _WRITERS, "_initialize_writers": _WRITERS,
    "_close_writers": _WRITERS, "_close_tb_writer": _WRITERS, "_save_custom_tensors_post_step": _WRITERS,
    "_log_params": _WRITERS, "export_collections": _WRITERS, "_export_model": _WRITERS,
    "_get_reduction_of_data": _WRITERS, "_make_numpy_array": _WRITERS,
    "_prepare_collections": _COLLS, "_get_collections_with_tensor": _COLLS,
    "_get_default_collections": _COLLS, "_increment_step": _COLLS, "_should_save_tensor_for_step": _COLLS,
    "_is_collection_being_saved_for_step": _COLLS, "should_save_tensor_or_collection": _COLLS,
    "_backward_apply": "parameters' gradient hooks are registered by register_module",
    "_closure_for_registering_forward_hook": "module forward hooks are registered by register_module",
    "_closure_for_registering_backward_hook": "module backward hooks are not used",
    "_get_num_workers": "workers come from torch.distributed", "_get_worker_name": "workers come from torch.distributed",
    "_cleanup": "close() is what runs at exit", "count_parameters": "register_module does not count parameters",
    "fhook": _PROFILER, "bhook": _PROFILER, "log_trace_event": _PROFILER,
    "log_outstanding_timeline_metrics": _PROFILER, "should_save_dataloader_metrics": _PROFILER,
    "INPUT_TENSOR_SUFFIX": "tensor names are smdebug's, fixed",
    "OUTPUT_TENSOR_SUFFIX": "tensor names are smdebug's, fixed", "GRADIENT_PREFIX": "tensor names are smdebug's, fixed",
})


def overridden(cls: type, base: type) -> set[str]:
    """Names defined by the classes of ``cls``'s MRO that come before ``base`` (a user's subclasses)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is base or issubclass(base, klass):
            break
        names.update(vars(klass))
    return names


def check_overrides(cls: type, base: type) -> frozenset[str]:
    """The honoured extension points ``cls`` overrides.

    Raises:
        SMDebugNotImplementedError: ``cls`` overrides an internal the hook never calls (every one is named).
    """
    names = overridden(cls, base)
    refused = sorted(names & NOT_HONOURED.keys())
    if refused:
        details = "; ".join(f"{n} ({NOT_HONOURED[n]})" for n in refused)
        raise SMDebugNotImplementedError(
            f"{cls.__name__} overrides smdebug hook internals that sdk_ext's PyTorch hook never calls, so the "
            f"override would never run: {details}. Override forward_hook, forward_pre_hook or backward_hook, and "
            "save with self._write_inputs/_write_outputs or save_tensor (see sdk_ext.pytorch.extensions)"
        )
    return frozenset(names & HONOURED)


class ExtensionPoints:
    """smdebug's overridable hook methods; mixed into :class:`sdk_ext.pytorch.Hook` (which provides the rest)."""

    INPUT_TENSOR_SUFFIX = "_input_"
    OUTPUT_TENSOR_SUFFIX = "_output_"
    GRADIENT_PREFIX = "gradient/"

    # provided by the hook
    _disabled: bool
    _in_step: bool
    _module_names: dict[nn.Module, str]
    last_saved_step: int | None
    step: StepNumber
    policy: Any
    collection_manager: Any

    def _forward_pre(self, module: nn.Module, inputs: Any) -> None:
        raise NotImplementedError

    def _save_module_tensors(self, module_name: str, suffix: str, value: Any) -> bool:
        raise NotImplementedError

    def _save_gradient(self, name: str, grad: torch.Tensor) -> None:
        raise NotImplementedError

    # --- the extension points ---------------------------------------------------------------------

    def forward_pre_hook(self, module: nn.Module, inputs: Any) -> None:
        """Before each forward of the registered model: starts the next step."""
        self._forward_pre(module, inputs)

    def forward_hook(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        """After each forward of a registered module (the model, a submodule, a loss): saves its inputs
        and outputs when this step saves them."""
        if not self._step_saves():
            return
        name = self._module_names.get(module)
        if name is None:
            return
        self._write_inputs(name, inputs)
        self._write_outputs(name, outputs)

    def backward_hook(self, tname: str) -> Callable[[torch.Tensor], None]:
        """The function to give ``tensor.register_hook``: it saves the gradient as ``gradient/{tname}``."""
        name = self.GRADIENT_PREFIX + tname

        def back(grad: torch.Tensor) -> None:
            if grad is not None:
                self._save_gradient(name, grad)

        return back

    @guarded
    def _write_inputs(self, name: str, inputs: Any) -> None:
        """Save the tensors of ``inputs`` as ``{name}_input_{i}`` (when this step saves them)."""
        if self._step_saves() and self._save_module_tensors(name, self.INPUT_TENSOR_SUFFIX, inputs):
            self.last_saved_step = int(self.step)

    @guarded
    def _write_outputs(self, name: str, outputs: Any) -> None:
        """Save the tensors of ``outputs`` as ``{name}_output_{i}`` (when this step saves them)."""
        if self._step_saves() and self._save_module_tensors(name, self.OUTPUT_TENSOR_SUFFIX, outputs):
            self.last_saved_step = int(self.step)

    # --- what overrides may ask ---------------------------------------------------------------------

    @property
    def module_maps(self) -> Mapping[nn.Module, str]:
        """Registered module -> its name in tensor names (smdebug 0.x's attribute; read-only)."""
        return MappingProxyType(self._module_names)

    @property
    def module_set(self) -> frozenset[nn.Module]:
        """The registered modules (smdebug 1.0's attribute; read-only)."""
        return frozenset(self._module_names)

    def _get_collections_to_save_for_step(self) -> set[Collection]:
        """The collections this step saves (empty outside a saved step)."""
        if not self._in_step:
            return set()
        return {self.collection_manager.get(n) for n in self.policy.active}

    def _step_saves(self) -> bool:
        return self._in_step and bool(self.policy.active)


__all__ = ["CUSTOM_MODULE_PATH", "HONOURED", "NOT_HONOURED", "ExtensionPoints", "check_overrides", "overridden"]
