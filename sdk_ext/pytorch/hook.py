"""The PyTorch hook: parameters, gradients, module inputs/outputs and losses of an ``nn.Module``.

    hook = sdk_ext.pytorch.Hook(out_dir, include_collections=["weights", "gradients"])
    hook.register_module(model)          # or a torch.compile'd model, or a DDP-wrapped one
    hook.register_loss(loss_fn)          # an nn.Module loss; record_tensor_value() for functional ones
    for x, y in data:                    # each forward of the model starts a step (or use hook.step())
        loss = loss_fn(model(x), y); loss.backward(); opt.step()

Names (smdebug's): parameters ``{ModelClass}_{param path}`` (``Net_fc1.weight``), gradients
``gradient/`` + that, module tensors ``{module path}_input_{i}`` / ``_output_{i}`` (the model itself
and losses by class name: ``Net_output_0``, ``CrossEntropyLoss_output_0``). The class and paths are
the user's model's, whatever wraps it (FSDP1, FSDP2, checkpoint wrappers, torch.compile:
:mod:`sdk_ext.pytorch.wrappers`); DDP keeps smdebug's ``DistributedDataParallel_module...`` names.
Parameters are saved at the start of a saved step (before that step's update); gradients of plain
parameters as backward produces them (a rank's own gradients, before any all-reduce). A sharded
parameter (FSDP, DTensor) is saved whole, its pieces put together on the writing ranks
(:mod:`sdk_ext.pytorch.gather`); its gradient is the reduced one, taken when backward ends. A
``torch.compile``'d model is named like its original; its submodules' inputs/outputs are not captured
(hooks inside a compiled graph would force recompiles), everything else is. A forward that activation
checkpointing recomputes during backward is not saved again.

Cost: hooks on submodules are registered only for modules an included collection can claim, and
gradient hooks only during saved steps, so a step that saves nothing costs two Python calls (and no
communication, sharded or not).
Workers: ``worker_{rank}`` of ``torch.distributed`` when it is initialized.

``torch.save(model)`` works with the hook registered: the model pickles without the hook and loads
with a do-nothing :class:`~sdk_ext.hooks.hook.DetachedHook` in its place. Values given with
``save_scalar``/``save_tensor`` before the first forward call are held and go with the first step.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from sdk_ext.hooks.collections import change_count
from sdk_ext.hooks.hook import Hook as BaseHook
from sdk_ext.hooks.hook import guarded
from sdk_ext.hooks.policy import TensorPlan
from sdk_ext.hooks.workers import launcher_rank
from sdk_ext.profiler.config import ProfilingConfig
from sdk_ext.profiler.timeline import StepTimeline
from sdk_ext.pytorch import wrappers
from sdk_ext.pytorch.extensions import CUSTOM_MODULE_PATH, ExtensionPoints, check_overrides
from sdk_ext.pytorch.gather import Item, ShardGather
from sdk_ext.pytorch.tensors import iter_tensors, to_numpy, torch_reductions
from sdk_ext.pytorch.wrappers import ShardedSource

logger = logging.getLogger(__name__)

GRADIENT_PREFIX = "gradient/"
_PROBE_INDICES = range(4)  # a module is hooked if a collection claims one of its first tensors


def _in_backward() -> bool:
    current = getattr(torch._C, "_current_graph_task_id", None)
    return current is not None and current() != -1


def _unwrap_compiled(module: nn.Module) -> tuple[nn.Module, bool]:
    inner = getattr(module, "_orig_mod", None)
    if isinstance(inner, nn.Module) and type(module).__name__ == "OptimizedModule":
        return inner, True
    return module, False


class Hook(ExtensionPoints, BaseHook):
    """Saves tensors of a PyTorch training job. Same constructor as :class:`sdk_ext.hooks.Hook`.

    Subclasses may override smdebug's extension points (``forward_hook``, ``forward_pre_hook``,
    ``backward_hook``, ``_write_inputs``/``_write_outputs``): see :mod:`sdk_ext.pytorch.extensions`.

    Raises:
        SMDebugNotImplementedError: a subclass overrides an smdebug internal this hook never calls.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: the extension points a subclass overrides (checked before anything is created)
        self._overrides = check_overrides(type(self), Hook)
        super().__init__(*args, **kwargs)
        #: the last step that saved a module tensor (smdebug's attribute; subclasses may set it)
        self.last_saved_step: int | None = None
        self._custom_modules = bool(self._overrides & CUSTOM_MODULE_PATH)
        self._custom_backward = "backward_hook" in self._overrides
        self._model: nn.Module | None = None
        self._compiled = False
        self._params: list[tuple[str, nn.Parameter]] = []
        self._module_names: dict[nn.Module, str] = {}
        self._losses: list[nn.Module] = []
        self._step_handles: list[Any] = []  # hooks of the current saved step, removed when it ends
        self._hooks_version: object = None
        self._param_candidates: list[tuple[str, nn.Parameter]] = []
        self._grad_candidates: list[tuple[str, nn.Parameter]] = []
        self._module_candidates: list[nn.Module] = []
        self._params_saved_at = -1
        self._counts: dict[str, int] = {}
        self._quiet = 0  # steps ahead known to save nothing (see _forward_pre)
        self._quiet_token: tuple[int, Any] = (-1, None)
        self._sharded: dict[str, ShardedSource] = {}  # FSDP / DTensor parameters, by trial name
        self._sharded_candidates: list[str] = []
        self._sharded_grad_candidates: list[str] = []
        self._gather: ShardGather | None = None
        # grads? -> (the names, their plans, the items made of them): the same list while nothing changes
        self._sharded_items: dict[bool, tuple[list[str], list[TensorPlan | None], list[Item]]] = {}
        self._grads_armed = False  # this step's backward will collect sharded gradients at its end

    # --- registration ----------------------------------------------------------------------------

    @property
    def has_model(self) -> bool:
        """Whether a model is registered (:meth:`register_module`)."""
        return self._model is not None

    def is_model(self, module: nn.Module) -> bool:
        """Whether ``module`` is the registered model (as registered: compiled or wrapped)."""
        return module is self._model

    def is_registered(self, module: nn.Module) -> bool:
        """Whether ``module`` is watched: the model, one of its submodules, or a registered loss."""
        return module in self._module_names

    @guarded
    def register_module(self, module: nn.Module, *, during_forward: bool = False) -> None:
        """Watch ``module`` (the model): its forward marks steps, its parameters and submodules are saved.

        Registering the registered model again does nothing (the zero-change path may have done it).
        ``during_forward``: called from inside the model's forward call (the zero-change path), so this
        call starts its step as the model's own pre-hook would have (it runs from the next call on).
        """
        if self._model is not None:
            if module is self._model or _unwrap_compiled(self._model)[0] is module:
                return
            raise ValueError(
                f"register_module({type(module).__name__}): this hook watches a {type(self._model).__name__} "
                "already; one hook watches one model (in a zero-change job, register your model before its "
                "first forward call, or not at all)"
            )
        inner = wrappers.unwrap(module)
        self._compiled = wrappers.is_compiled(module)
        prefix = wrappers.model_class_name(inner)
        self._model = module
        for param in wrappers.model_parameters(module):
            name = f"{prefix}_{param.name}"
            if param.sharded is not None:
                self._sharded[name] = param.sharded
            elif param.param is not None:
                self._params.append((name, param.param))
        if self._sharded:
            rank, world_size = self._distributed_info()
            self._gather = ShardGather(self._sharded, rank=rank, world_size=world_size,
                                       include_all=self.include_workers == "all", need_array=self._needs_array,
                                       bytes_only=self._bytes_only)
            self._gather.setup()  # collectives, while every rank registers its model
        for path, sub in wrappers.named_modules(module):
            self._module_names[sub] = path if path else prefix
            sub._module_name = path if path else prefix  # type: ignore[assignment]  # smdebug's str attribute
        if self._compiled:
            del self._module_names[inner]
            self._module_names[module] = prefix
        # first, so that it runs before FSDP2's own pre-forward hook unshards the parameters
        overridden_pre = "forward_pre_hook" in self._overrides
        module.register_forward_pre_hook(self.forward_pre_hook if overridden_pre else self._forward_pre, prepend=True)
        if self._custom_modules:  # as smdebug: forward_hook on the model and every submodule, at every step
            for sub in list(self._module_names):
                sub.register_forward_hook(self.forward_hook)
        if self._custom_backward:  # as smdebug: backward_hook(name) on every parameter that requires grad
            for name, tensor in self._params:
                if tensor.requires_grad:
                    tensor.register_hook(self.backward_hook(name))  # type: ignore[no-untyped-call]
        if during_forward:
            (self.forward_pre_hook if overridden_pre else self._forward_pre)(module, None)

    def register_hook(self, module: nn.Module) -> None:
        """smdebug's other name for :meth:`register_module`."""
        self.register_module(module)

    @guarded
    def register_loss(self, loss_module: nn.Module) -> None:
        """Save the inputs/outputs of a loss module (``{LossClass}_output_0``) when collections claim them."""
        self._module_names[loss_module] = type(loss_module).__name__
        loss_module._module_name = type(loss_module).__name__  # type: ignore[assignment]  # a str attribute
        if loss_module not in self._losses:
            self._losses.append(loss_module)
            self._hooks_version = None
            if self._custom_modules:
                loss_module.register_forward_hook(self.forward_hook)
                return
            if self._in_step and self.policy.active and self._params_saved_at == self._steps.current.global_step:
                # registered in the middle of a saved step (zero-change: during its first call)
                self._step_handles.append(loss_module.register_forward_hook(self._forward_post))

    @guarded
    def record_tensor_value(self, tensor_name: str, tensor_value: torch.Tensor) -> None:
        """Save a tensor computed outside modules (e.g. ``F.mse_loss(...)``) as ``{tensor_name}_output_0``."""
        self._ensure_step()
        self._save_module_tensors(tensor_name, "_output_", tensor_value)

    # --- steps -----------------------------------------------------------------------------------

    def _add_step_observers(self, timeline: StepTimeline, settings: ProfilingConfig) -> None:
        if settings.detailed is not None:  # FrameworkProfile's DetailedProfilingConfig: torch.profiler
            from sdk_ext.pytorch.detailed import TorchProfilerWindow

            timeline.observers.append(TorchProfilerWindow(settings.detailed, timeline.out_dir, timeline.node))

    def _distributed_info(self) -> tuple[int, int]:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return launcher_rank(os.environ) or (0, 1)  # a torchrun rank that never initializes torch.distributed

    def _forward_pre(self, module: nn.Module, inputs: Any) -> None:
        # Fast path, most steps: the policy said the next steps of this mode save nothing, and
        # neither the mode nor any collection changed since. Only the counters move.
        if self._quiet and self._quiet_token == (change_count(), self._steps.mode):
            self._quiet -= 1
            self._steps.next()
            if self._timeline is not None:
                self._timeline.begin(self._steps.current)
            return
        self._step_start(module)

    @guarded
    def _step_start(self, module: nn.Module) -> None:
        if self._explicit_steps:
            self._ensure_step()
        else:
            self._begin_step(None)
        if not self.policy.active:
            if not self._explicit_steps and self._out_closed():
                current = self._steps.current
                self._quiet = self.policy.quiet_steps(current.mode, current.mode_step)
                self._quiet_token = (change_count(), current.mode)
            return
        step = self._steps.current.global_step
        if self._params_saved_at == step:
            return  # another forward in the same explicit step
        self._params_saved_at = step
        self._sync_candidates()
        for name, param in self._param_candidates:
            plan = self.policy.plan(name)
            if plan is not None:
                self._save(name, plan, param.data)
        handles = self._step_handles
        self._grads_armed = False
        sharded_grads = torch.is_grad_enabled() and any(
            self.policy.plan(n) is not None for n in self._sharded_grad_candidates)
        if self._sharded_candidates:
            # the shards do not change until backward ends, where the gradients' collection finishes
            # this one: its transfers overlap with forward and backward
            self._collect_sharded(self._sharded_candidates, grads=False, defer=sharded_grads)
        if torch.is_grad_enabled():
            for name, param in self._grad_candidates:
                if self.policy.plan(name) is not None:
                    handles.append(param.register_hook(self._gradient_saver(name)))  # type: ignore[no-untyped-call]
            if sharded_grads:
                assert self._model is not None
                handles.append(self._model.register_forward_hook(self._arm_backward))
        for mod in self._module_candidates:  # picked up by this very call too (torch reads them after forward)
            handles.append(mod.register_forward_hook(self._forward_post))

    def _holds_values(self) -> bool:
        # Steps start at each forward call: a value given before the first one (or before the next
        # forward of a script that called end_step) belongs to the step that call starts.
        return not self._in_step and not self._explicit_steps

    def _open_output(self) -> None:
        # Files of a step open (a save_scalar at a quiet step, say): the next forward must take the slow
        # path, which closes them. Zeroing the count here keeps that check off the fast path.
        self._quiet = 0
        super()._open_output()

    def _out_closed(self) -> bool:
        return self._out is None or not self._out.step_open

    def _end_step(self) -> None:
        try:
            if self._gather is not None:
                self._gather.finish()  # sharded tensors still in flight go into this step's files
        finally:
            if self._step_handles:
                for handle in self._step_handles:
                    handle.remove()
                self._step_handles.clear()
            if self._counts:
                self._counts.clear()
            super()._end_step()

    def _sync_candidates(self) -> None:
        """Which parameters, gradients and modules collections can claim (recomputed when collections change)."""
        self._resolve_module_collections()
        version = self.collection_manager.version
        if version == self._hooks_version:
            return
        policy = self.policy
        self._param_candidates = [(n, p) for n, p in self._params if policy.could_save(n)]
        self._grad_candidates = [] if self._custom_backward else [
            (GRADIENT_PREFIX + n, p) for n, p in self._params if p.requires_grad and policy.could_save(GRADIENT_PREFIX + n)
        ]
        self._sharded_candidates = [n for n in self._sharded if policy.could_save(n)]
        self._sharded_grad_candidates = [GRADIENT_PREFIX + n for n in self._sharded if policy.could_save(GRADIENT_PREFIX + n)]
        if self._custom_modules:  # forward_hook is registered on every module for good (register_module)
            self._module_candidates = []
            self._hooks_version = self.collection_manager.version
            return
        modules = list(self._losses)
        for module, name in self._module_names.items():
            claimed = any(
                policy.could_save(f"{name}_{kind}_{i}") for kind in ("input", "output") for i in _PROBE_INDICES
            )
            if not claimed or module in modules:
                continue
            if self._compiled and module is not self._model:
                self._warn_once("<modules>", "compiled", "inputs/outputs of submodules of a torch.compile'd model are "
                                "not captured; register the uncompiled model to capture them")
            else:
                modules.append(module)
        self._module_candidates = modules
        self._hooks_version = self.collection_manager.version

    def _resolve_module_collections(self) -> None:
        """Turn ``Collection.add_module_tensors`` entries into regexes on the modules' tensor names."""
        for coll in self.collection_manager:
            pending = [m for m in coll.modules if m[0] in self._module_names]
            for entry in pending:
                module, inputs, outputs = entry
                name = re.escape(self._module_names[module])
                regexes = ([f"^{name}_input_"] if inputs else []) + ([f"^{name}_output_"] if outputs else [])
                coll.modules.remove(entry)
                if regexes:
                    coll.include(regexes)

    # --- sharded parameters (FSDP, DTensor): see sdk_ext.pytorch.gather ------------------------------

    def _collect_sharded(self, names: list[str], *, grads: bool, defer: bool = False) -> None:
        """Collect the sharded weights (or gradients) of ``names`` that this step saves; every rank
        calls this at the same point with the same names (the policy is the same everywhere)."""
        plans = [self.policy.plan(name) for name in names]
        made = self._sharded_items.get(grads)
        if made is not None and made[0] is names and all(a is b for a, b in zip(made[1], plans)):
            items = made[2]  # the same list as last time: the gather reuses its plan of it without a look
        else:
            items = []
            for name, plan in zip(names, plans):
                if plan is None:
                    continue
                key = name[len(GRADIENT_PREFIX):] if grads else name
                source = self._sharded[key]
                items.append(Item(name, key, plan, source.grad if grads else source.weight))
            self._sharded_items[grads] = (names, plans, items)
        if not items:
            return
        if self._gather is not None:
            self._gather.collect(items, self._write_collected, defer=defer)

    def _write_collected(self, item: Item, full: torch.Tensor | None, reductions: dict[tuple[str, bool], Any],
                         shape: tuple[int, ...], /, parts: Sequence[memoryview] | None = None) -> None:
        if parts is not None and full is not None:  # the raw tensor only, its bytes where they lie
            self._write(item.name, item.plan, to_numpy(full), {}, shape=shape, content=parts)
        elif full is not None:
            self._save(item.name, item.plan, full)
        else:
            self._write(item.name, item.plan, None, reductions, shape=shape)

    def _bytes_only(self, plan: TensorPlan) -> bool:
        """Whether writing ``plan`` needs only the raw tensor's bytes: no reduction, and no TensorBoard
        export (the rule TrialOutput.write holds parts to)."""
        return plan.raw and not plan.ops and not self.export_tensorboard

    def _needs_array(self, plan: TensorPlan) -> bool:
        return plan.raw or (self.export_tensorboard and (plan.histogram or plan.scalar))

    @guarded
    def _arm_backward(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        """End of a saved step's forward: the backward that starts from these outputs collects the
        sharded gradients when it ends."""
        for tensor in iter_tensors(outputs):
            if tensor.requires_grad:
                tensor.register_hook(self._backward_started)  # type: ignore[no-untyped-call]

    @guarded
    def _backward_started(self, grad: torch.Tensor) -> None:
        if self._grads_armed or self._disabled:
            return
        self._grads_armed = True
        # FSDP finishes its gradients in a callback at the end of backward, queued during backward
        # too; a callback queued from a callback runs after every one queued before it.
        queue = torch.autograd.Variable._execution_engine.queue_callback
        queue(lambda: queue(self._collect_sharded_grads))

    @guarded
    def _collect_sharded_grads(self) -> None:
        if self._in_step and self.policy.active:
            self._collect_sharded(self._sharded_grad_candidates, grads=True)

    # --- capture ---------------------------------------------------------------------------------

    def _gradient_saver(self, name: str) -> Any:
        def save(grad: torch.Tensor) -> None:
            self._save_gradient(name, grad)

        return save

    @guarded
    def _save_gradient(self, name: str, grad: torch.Tensor) -> None:
        if self._in_step:
            plan = self.policy.plan(name)
            if plan is not None:
                self._save(name, plan, grad)

    @guarded
    def _forward_post(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        if not self._in_step or not self.policy.active or _in_backward():
            return  # in backward: activation checkpointing recomputes a forward already saved
        name = self._module_names.get(module)
        if name is not None:
            saved = self._save_module_tensors(name, "_input_", inputs)
            if self._save_module_tensors(name, "_output_", outputs) or saved:
                self.last_saved_step = self._steps.current.global_step

    def _save_module_tensors(self, module_name: str, suffix: str, value: Any) -> bool:
        """Save the tensors of ``value`` the step claims; True if it saved any."""
        base = module_name + suffix
        index = self._counts.get(base, 0)
        saved = False
        for tensor in iter_tensors(value):
            name = f"{base}{index}"
            index += 1
            plan = self.policy.plan(name)
            if plan is not None:
                self._save(name, plan, tensor)
                saved = True
        self._counts[base] = index
        return saved

    # --- values ----------------------------------------------------------------------------------

    def _to_numpy(self, value: Any) -> np.ndarray[Any, Any]:
        return to_numpy(value)

    def _save(self, name: str, plan: TensorPlan, value: Any) -> None:
        if wrappers.is_dtensor(value):
            value = value.full_tensor()  # a collective: every rank saves the same tensors
        if self._out is None:
            return  # this rank writes nothing (include_workers="one"), or a dry run
        if not isinstance(value, torch.Tensor):
            super()._save(name, plan, value)
            return
        reductions = torch_reductions(value, plan.ops) if plan.ops else {}
        need_array = (
            plan.raw
            or len(reductions) < len(plan.ops)
            or (self.export_tensorboard and (plan.histogram or plan.scalar))
        )
        array = to_numpy(value) if need_array else None
        self._write(name, plan, array, reductions, shape=tuple(value.shape))


__all__ = ["GRADIENT_PREFIX", "Hook"]
