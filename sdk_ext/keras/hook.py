"""The Keras 3 hook: a ``keras.callbacks.Callback`` that saves a ``model.fit/evaluate/predict`` run.

    hook = sdk_ext.keras.KerasHook(out_dir, include_collections=["weights", "gradients"])
    model.fit(x, y, validation_data=(xv, yv), callbacks=[hook])

Steps: every training batch is a TRAIN step, every batch of validation or ``evaluate()`` an EVAL
step, every ``predict()`` batch a PREDICT step. The logs Keras hands to ``on_epoch_end`` (epoch
averages and ``val_*``) are written at a GLOBAL-mode step of their own after each epoch, always
(smdebug forced them into the last step of whatever mode ran last).

What is saved at a saved step (names in :mod:`sdk_ext.keras.names`): losses and metrics from the
batch logs; weights and biases after the batch (after the update, so for plain SGD
``w[s] = w[s-1] - lr * g[s]``); the gradients the optimizer applied (:mod:`sdk_ext.keras.capture`);
optimizer variables; layer inputs/outputs and the model's inputs, labels and predictions.

Backends: torch and TensorFlow (graph mode, ``run_eagerly=True``, ``jit_compile=True``). Layer
and model tensors are only concrete in eager execution, so in graph/XLA mode a step that saves
``layers``/``inputs``/``outputs`` runs eagerly (same maths, slower); other steps keep the compiled
function. On JAX, ``fit`` never calls ``optimizer.apply`` and layers run traced: losses, metrics,
weights, biases and optimizer variables are saved, gradients and layer tensors are not (said
once at construction). ``steps_per_execution > 1`` makes one step of each execution.

Custom loops: ``wrap_optimizer(opt)``, ``save_gradients(grads, variables)``, ``wrap_tape(tape)``
(TensorFlow), ``register_model(model)``, ``save_tensor``/``save_scalar``, steps by ``hook.step()`` or,
with ``wrap_tape``, each ``with tape:`` (a TRAIN step, as in smdebug). A registered model's calls give
``inputs`` and ``predictions`` (eager calls only); wrapped optimizers give ``optimizer_variables`` at the
end of each training step. An included collection that a custom loop leaves empty at its first saved
step gets one warning saying why (what the script must add, or that the values were symbolic).

Values given while no step is open (before the first batch or ``with tape:``, between two ``fit``
batches) are held for the step that starts next, unless the script drives steps itself: so a
``save_scalar`` before the first tape step is filed with step 0 and training steps are numbered as
smdebug numbers them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterable
from typing import Any

import keras
import numpy as np

from sdk_ext.hooks import workers
from sdk_ext.hooks.collections import CollectionKeys
from sdk_ext.hooks.hook import Hook as BaseHook
from sdk_ext.hooks.hook import guarded
from sdk_ext.hooks.policy import TensorPlan
from sdk_ext.hooks.reduction_config import ReductionConfig
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode
from sdk_ext.hooks.step_counter import Step
from sdk_ext.keras import capture, names
from sdk_ext.keras.eager import EagerSteps
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import Storage

logger = logging.getLogger(__name__)

_MODEL_IO = ("inputs", "labels", "predictions")


def _scalar_plan(collection: str) -> TensorPlan:
    return TensorPlan(True, False, (), False, True, (collection,))


class KerasHook(keras.callbacks.Callback, BaseHook):  # type: ignore[misc]
    """Saves tensors of a Keras 3 training job (smdebug's ``KerasHook``; same constructor).

    Args: as :class:`sdk_ext.hooks.Hook` (``out_dir``, ``export_tensorboard``, ``tensorboard_dir``,
    ``dry_run``, ``reduction_config``, ``save_config``, ``include_regex``, ``include_collections``,
    ``save_all``, ``include_workers``), positional in smdebug's order.
    """

    #: The per-epoch metrics steps (GLOBAL mode) are no training steps: the step timeline skips them.
    timeline_global_mode = None

    builtin_collections = names.KERAS_COLLECTIONS
    default_include_collections = (CollectionKeys.METRICS, CollectionKeys.LOSSES, CollectionKeys.SM_METRICS)

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | Storage,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | SaveConfigMode | dict[Any, Any] | int | None = None,
        include_regex: Iterable[str] | str | None = None,
        include_collections: Iterable[str] | str | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        **kwargs: Any,
    ) -> None:
        keras.callbacks.Callback.__init__(self)
        BaseHook.__init__(
            self, out_dir, export_tensorboard=export_tensorboard, tensorboard_dir=tensorboard_dir, dry_run=dry_run,
            reduction_config=reduction_config, save_config=save_config, include_regex=include_regex,
            include_collections=include_collections, save_all=save_all, include_workers=include_workers, **kwargs,
        )
        self.backend = capture.backend_name()
        self.tap = capture.GradientTap()
        self.layers = capture.LayerRecorder()
        self._attached: Any = None
        self._model_name: str | None = None
        self._weights: list[tuple[str, Any]] = []
        self._grad_names: dict[int, str] = {}
        self._grads_saved: set[str] = set()  # gradients saved by save_gradients in this step
        self._layer_bases: dict[str, list[str]] = {}  # record key -> [input base, output base]
        self._io_armed = False
        self._eager = EagerSteps()
        self._training = False
        self._in_fit = False  # a Keras loop (fit/evaluate/predict) has run: its callbacks drive the steps
        self._registered = False  # register_model was called: a custom loop's model calls are captured
        self._saved_colls: set[str] = set()  # collections that got a tensor in the current step
        self._checked_custom: set[str] = set()  # collections checked for emptiness in a custom loop
        self._symbolic_io = False  # a registered model ran inside a tf.function: nothing to read
        #: wrap_tape said once that a tape inside a tf.function makes no steps.
        self.graph_tape_warned = False
        self._optimizer_state: dict[int, tuple[int, list[Any]]] = {}  # id -> (variable count, own variables)
        #: Steps run eagerly in graph mode to capture layer tensors, by function (train/test/predict).
        self.eager_steps = self._eager.counts
        unnamed = _unnamed_worker(self.backend)
        if unnamed is not None:
            logger.warning("sdk_ext KerasHook: %s; this process writes as worker_0", unnamed)
        if self.backend == "jax":
            logger.warning(
                "sdk_ext KerasHook on the JAX backend: losses, metrics, weights, biases and optimizer variables "
                "are saved; gradients and layer inputs/outputs are NOT (JAX's fit does not call optimizer.apply "
                "and runs layers traced). Use the torch or tensorflow backend to capture them."
            )

    # --- Keras callback API ----------------------------------------------------------------------

    def set_model(self, model: Any) -> None:
        keras.callbacks.Callback.set_model(self, model)
        self._attach_guarded(model)

    @guarded
    def _attach_guarded(self, model: Any) -> None:
        self._attach(model)

    @guarded
    def register_model(self, model: Any) -> None:
        """Custom loops: name variables as ``fit`` would, and capture ``model``'s layer tensors and its inputs
        and predictions from its (eager) calls (smdebug's name)."""
        self.set_model(model)
        self._registered = True
        if self.backend != "jax" and any(self.policy.could_save(n) for n in _MODEL_IO):
            capture.wrap_method(model, "call", self._model_call_wrapper)

    @guarded
    def on_train_begin(self, logs: Any = None) -> None:
        self._training = True
        self._begin_mode(ModeKeys.TRAIN)

    @guarded
    def on_train_end(self, logs: Any = None) -> None:
        self._training = False
        self._finish_mode()

    @guarded
    def on_test_begin(self, logs: Any = None) -> None:
        self._begin_mode(ModeKeys.EVAL)

    @guarded
    def on_test_end(self, logs: Any = None) -> None:
        self._finish_mode()
        if self._training:
            self._steps.mode = ModeKeys.TRAIN

    @guarded
    def on_predict_begin(self, logs: Any = None) -> None:
        self._begin_mode(ModeKeys.PREDICT)

    @guarded
    def on_predict_end(self, logs: Any = None) -> None:
        self._finish_mode()

    @guarded
    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._batch_begin()

    @guarded
    def on_test_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._batch_begin()

    @guarded
    def on_predict_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._batch_begin()

    @guarded
    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._batch_end(batch, logs)

    @guarded
    def on_test_batch_end(self, batch: int, logs: Any = None) -> None:
        self._batch_end(batch, logs)

    @guarded
    def on_predict_batch_end(self, batch: int, logs: Any = None) -> None:
        if logs and self._in_step and self.policy.active and "outputs" in logs:
            self._save_many("predictions", logs["outputs"])
        self._batch_end(batch, None)

    @guarded
    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        if not logs:
            return
        if self._in_step:
            self._end_step()
        mode = self._steps.mode
        self._steps.mode = ModeKeys.GLOBAL
        try:
            self._forced_step({k: v for k, v in logs.items() if not isinstance(v, (dict, list, tuple))})
        finally:
            self._steps.mode = mode

    # --- custom loops ----------------------------------------------------------------------------

    @guarded
    def wrap_optimizer(self, optimizer: Any) -> Any:
        """Save the gradients ``optimizer`` applies (``apply`` / ``apply_gradients``); returns it."""
        return self.tap.wrap(optimizer)

    @guarded
    def save_gradients(self, grads: Iterable[Any], variables: Iterable[Any]) -> None:
        """Save gradients of ``variables`` at the current step (eager tensors; in a ``tf.function``
        use :meth:`wrap_optimizer` instead)."""
        self._ensure_step()
        if not self._is_train_step():
            return
        for g, v in zip(grads, variables):
            if g is not None:
                name = self._grad_name(v)
                plan = self.policy.plan(name)
                if plan is not None and name not in self._grads_saved:
                    self._grads_saved.add(name)
                    self._save(name, plan, g)

    @guarded
    def save_weights(self, variables: Iterable[Any]) -> None:
        """Save the values of ``variables`` at the current step, named as weights/biases (a random
        generator's state, which Keras does not count among a model's weights, is skipped)."""
        self._ensure_step()
        for v in variables:
            if names.is_rng_state(v):
                continue
            name = names.weight_name(names.variable_key(v, self._model_name))
            plan = self.policy.plan(name)
            if plan is not None:
                self._save(name, plan, v)

    def wrap_tape(self, tape: Any) -> Any:
        """TensorFlow: a ``tf.GradientTape`` whose ``with`` block is a step and whose ``gradient(loss,
        variables)`` saves the gradients, the variables and the loss (``loss``) (smdebug's ``wrap_tape``)."""
        from sdk_ext.keras.tape import wrap_tape

        return wrap_tape(self, tape)

    # --- attaching -------------------------------------------------------------------------------

    def _attach(self, model: Any) -> None:
        if model is None:
            return
        if model is not self._attached:
            self._attached = model
            self._model_name = getattr(model, "name", None)
            self._eager.forget()
            self._layer_bases = {}
            if self.backend != "jax":
                for layer in _iter_layers(model):
                    bases = self.layers.candidates(layer)
                    if any(self.policy.could_save(n) for group in bases.values() for n in _variants(group)):
                        self.layers.wrap_layer(layer, layer.name)
                        self._layer_bases.update(bases)
                if any(self.policy.could_save(n) for n in _MODEL_IO):
                    capture.wrap_method(model, "compute_metrics", self._metrics_wrapper)
        optimizer = getattr(model, "optimizer", None)
        if optimizer is not None and self.backend != "jax":
            self.tap.wrap(optimizer)

    def _refresh_weights(self) -> None:
        model = self._attached
        if model is None:
            return
        variables = [v for v in model.weights if not names.is_rng_state(v)]
        if len(variables) != len(self._weights):
            self._weights = [(names.weight_name(names.variable_key(v, self._model_name)), v) for v in variables]
            self._grad_names = {id(v): names.gradient_name(names.variable_key(v, self._model_name)) for v in variables}

    def _metrics_wrapper(self, original: Any) -> Any:
        hook = self

        def compute_metrics(x: Any, y: Any, y_pred: Any, *args: Any, **kwargs: Any) -> Any:
            if hook._io_armed:
                hook._keep_model_io(x, y, y_pred)
            return original(x, y, y_pred, *args, **kwargs)

        return compute_metrics

    def _model_call_wrapper(self, original: Any) -> Any:
        hook = self

        def call(*args: Any, **kwargs: Any) -> Any:
            outputs = original(*args, **kwargs)
            if hook._io_armed:
                inputs = args[:1] if args else list(kwargs.values())[:1]
                hook._keep_model_io(inputs, None, outputs)
            return outputs

        return call

    def _keep_model_io(self, x: Any, y: Any, y_pred: Any) -> None:
        values = {"inputs": capture.flatten(x), "labels": capture.flatten(y), "predictions": capture.flatten(y_pred)}
        for base, tensors in values.items():
            if not tensors:
                continue
            if any(capture.is_symbolic(t) for t in tensors):
                self._symbolic_io = True
                continue
            self.layers.values.setdefault(f"<model>{base}", ([], [capture.detached(t) for t in tensors]))

    # --- steps -----------------------------------------------------------------------------------

    def _begin_mode(self, mode: ModeKeys) -> None:
        self._in_fit = True
        if self._in_step:
            self._end_step()
        self._attach(self.model)
        self._steps.mode = mode

    def _finish_mode(self) -> None:
        if self._in_step:
            self._end_step()
        self._eager.restore()
        if self._out is not None:
            self._out.flush()

    def _batch_begin(self) -> None:
        self._begin_step(None)
        if (self._io_armed or self.layers.armed) and self.backend == "tensorflow":
            self._eager.swap(self._attached, self._steps.current.mode)

    def _batch_end(self, batch: int, logs: Any) -> None:
        if not self._in_step:
            return
        if self.policy.active:
            for key, value in {**(logs or {}), "batch": batch}.items():  # smdebug's metrics add the batch index
                if not isinstance(value, (dict, list, tuple)):
                    self._save_log(key, value)
            self._refresh_weights()
            for name, var in self._weights:
                plan = self.policy.plan(name)
                if plan is not None:
                    self._save(name, plan, var)
        self._end_step()
        self._eager.restore()

    def _is_train_step(self) -> bool:
        return self._steps.current.mode in (ModeKeys.TRAIN, ModeKeys.GLOBAL)

    def _begin_step(self, global_step: int | None) -> None:
        super()._begin_step(global_step)
        self._grads_saved.clear()
        self._arm(self._steps.current)

    def _holds_values(self) -> bool:
        # Keras starts the steps (a fit batch, a ``with tape:`` block): a value given while none is open
        # belongs to the step that starts next. smdebug filed a save_scalar given before the first tape
        # step with step 0; opening a step of its own for it would number every training step one higher.
        return not self._in_step and not self._explicit_steps

    def _arm(self, step: Step) -> None:
        """Arm the gradient tap and the layer recorder for a step that saves what they capture."""
        if not self.policy.active:  # most steps: disarm (assigns the TF flag only if it was set)
            if self.tap.armed:
                self.tap.arm(False)
            if self.layers.armed:
                self.layers.arm(False)
            self._io_armed = False
            return
        self._refresh_weights()
        grads = step.mode in (ModeKeys.TRAIN, ModeKeys.GLOBAL) and (
            not self._grad_names or any(self.policy.plan(n) is not None for n in self._grad_names.values())
        )
        self.tap.arm(grads)
        layers = any(
            self.policy.plan(n) is not None for group in self._layer_bases.values() for n in _variants(group)
        )
        self.layers.arm(layers)
        self._io_armed = any(
            self.policy.plan(n) is not None or self.policy.plan(f"{n}_0") is not None for n in _MODEL_IO
        )

    def _end_step(self) -> None:
        if self._in_step and self.policy.active and not self._disabled:
            try:
                self._save_captured()
                if self._is_train_step():
                    self._save_optimizer_variables()
                if not self._in_fit:
                    self._check_custom_loop()
            finally:
                self.layers.values.clear()
        self._saved_colls.clear()
        super()._end_step()

    def _check_custom_loop(self) -> None:
        """In a custom loop, warn once for each included collection that its first saved step left empty,
        saying what the script must add (or why it cannot be saved there)."""
        active = self.policy.active
        for coll in _CUSTOM_LOOP_SOURCES:
            if coll in self._checked_custom or coll not in active or not self._included(coll):
                continue
            self._checked_custom.add(coll)
            if coll in self._saved_colls:
                continue
            logger.warning(
                "sdk_ext KerasHook: collection %r is included but this custom training loop saved nothing in it at "
                "step %d (the first step that saves it): %s", coll, self._steps.current.global_step,
                self._why_empty(coll),
            )

    def _included(self, coll: str) -> bool:
        include = self.policy.include_collections
        return coll in include or CollectionKeys.ALL in include

    def _why_empty(self, coll: str) -> str:
        eager_only = ("the model ran inside a tf.function, where its tensors are symbolic: they are saved from "
                      "eager calls only (run the step eagerly on the steps that save them)")
        if coll in (CollectionKeys.INPUTS, CollectionKeys.OUTPUTS, CollectionKeys.LAYERS):
            if not self._registered or self.backend == "jax":
                return ("the hook sees a model's calls only once it is registered: call hook.register_model(model) "
                        "before training" + (" (not on the JAX backend)" if self.backend == "jax" else ""))
            if self._symbolic_io or coll == CollectionKeys.LAYERS:
                return eager_only
            return ("a custom loop hands the hook no labels: save them with hook.save_tensor('labels', y, "
                    "collections_to_write='outputs')" if coll == CollectionKeys.OUTPUTS else
                    "the registered model was not called during the step")
        if coll == CollectionKeys.OPTIMIZER_VARIABLES:
            if not self._optimizers():
                return "the hook knows no optimizer: wrap it, optimizer = hook.wrap_optimizer(optimizer)"
            return "the wrapped optimizer has no variables yet (it is built at its first apply)"
        return ("the hook saw no gradients: use hook.wrap_tape(tf.GradientTape()), hook.wrap_optimizer(optimizer) "
                "or hook.save_gradients(grads, variables)")

    def _save_captured(self) -> None:
        if self.tap.armed:
            for var, grad in self.tap.taken():
                name = self._grad_name(var)
                plan = self.policy.plan(name)
                if plan is not None and name not in self._grads_saved:
                    self._save(name, plan, grad)
            self.tap.arm(False)
        for key, (ins, outs) in list(self.layers.values.items()):
            if key.startswith("<model>"):
                self._save_many(key[len("<model>"):], outs)
            elif key in self._layer_bases:
                in_base, out_base = self._layer_bases[key]
                self._save_many(in_base, ins)
                self._save_many(out_base, outs)

    def _forced_step(self, values: dict[str, Any]) -> None:
        """A step of its own that writes ``values`` (losses/metrics) whatever the save config says."""
        self._begin_step(None)
        out = self._out
        changed = False
        try:
            if out is not None:
                if not out.step_open:
                    cur = self._steps.current
                    out.open_step(cur.global_step, cur.mode, cur.mode_step)
                for key, value in values.items():
                    coll = CollectionKeys.LOSSES if names.LOSS_REGEX.search(key) else CollectionKeys.METRICS
                    changed = self.collection_manager.get(coll).record_saved(key) or changed
                    out.write(key, _scalar_plan(coll), self._to_numpy(value), {})
        finally:
            self._in_step = False
            if out is not None and out.step_open:
                changed = changed or self.policy.names_changed
                self.policy.names_changed = False
                out.close_step(collections_changed=changed)

    def _fail(self, where: str) -> None:
        super()._fail(where)
        with contextlib.suppress(Exception):  # a disabled hook captures nothing more, keeps nothing
            self.tap.arm(False)
        self.layers.arm(False)
        self._io_armed = False
        with contextlib.suppress(Exception):
            self._eager.restore()

    def _distributed_info(self) -> tuple[int, int]:
        """torch.distributed (torch backend), ``jax.process_index()`` (JAX backend, keras.distribution),
        the strategy's cluster (TensorFlow multi-worker strategies), else TF_CONFIG or a launcher's RANK."""
        if self.backend == "torch":
            import torch

            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                return dist.get_rank(), dist.get_world_size()
        elif self.backend == "jax":
            jax = sys.modules.get("jax")
            if jax is not None and jax.process_count() > 1:
                return int(jax.process_index()), int(jax.process_count())
        elif self.backend == "tensorflow":
            found = _tf_strategy_rank()
            if found is not None:
                return found
        return workers.environment_rank(os.environ) or (0, 1)

    # --- values ----------------------------------------------------------------------------------

    def _grad_name(self, variable: Any) -> str:
        name = self._grad_names.get(id(variable))
        if name is None:
            name = names.gradient_name(names.variable_key(variable, self._model_name))
            self._grad_names[id(variable)] = name
        return name

    def _save_log(self, key: str, value: Any) -> None:
        if key == "outputs":
            return
        coll = CollectionKeys.LOSSES if names.LOSS_REGEX.search(key) else CollectionKeys.METRICS
        metrics = self.collection_manager.get(coll)
        if not metrics.has_tensor_name(key) and not metrics.matches(key):
            metrics.add_tensor_name(key)
            self.policy.names_changed = True
            self._refresh_step()
        plan = self.policy.plan(key)
        if plan is not None:
            self._save(key, plan, value)

    def _optimizers(self) -> list[Any]:
        """The model's optimizer and those given to wrap_optimizer, each once."""
        found = {id(o): o for o in (getattr(self._attached, "optimizer", None), *self.tap.optimizers) if o is not None}
        return list(found.values())

    def _save_optimizer_variables(self) -> None:
        optimizers = self._optimizers()
        if not optimizers:
            return
        coll = self.collection_manager.get(CollectionKeys.OPTIMIZER_VARIABLES)
        for optimizer in optimizers:
            count = len(getattr(optimizer, "variables", None) or ())
            cached = self._optimizer_state.get(id(optimizer))
            if cached is None or cached[0] != count:  # built (or rebuilt) since: find its own variables again
                cached = (count, names.optimizer_state(optimizer))
                self._optimizer_state[id(optimizer)] = cached
            for var in cached[1]:
                name = names.optimizer_variable_name(var)
                if not coll.has_tensor_name(name):
                    coll.add_tensor_name(name)
                    self.policy.names_changed = True
                plan = self.policy.plan(name)
                if plan is not None:
                    self._save(name, plan, var)

    def _save(self, name: str, plan: TensorPlan, value: Any) -> None:
        self._saved_colls.update(plan.collections)
        super()._save(name, plan, value)

    def _save_many(self, base: str, tensors: Any) -> None:
        flat = capture.flatten(tensors)
        for name, tensor in zip(names.tensor_names(base, len(flat)), flat):
            plan = self.policy.plan(name)
            if plan is not None:
                self._save(name, plan, tensor)

    def _to_numpy(self, value: Any) -> np.ndarray[Any, Any]:
        return capture.to_numpy(value)

    def close(self) -> None:
        try:
            self._eager.restore()
            if self._held and not self._in_step and not self._closed:
                # values given after the last batch (a save_scalar after fit): written at close in a step of
                # their own, which no batch made: a GLOBAL one, like the epoch-end logs, not one more TRAIN step
                self._steps.mode = ModeKeys.GLOBAL
        finally:
            super().close()


#: Collections a custom loop fills only if the script gives the hook what they need.
_CUSTOM_LOOP_SOURCES = (CollectionKeys.INPUTS, CollectionKeys.OUTPUTS, CollectionKeys.LAYERS,
                        CollectionKeys.OPTIMIZER_VARIABLES, CollectionKeys.GRADIENTS)


def _variants(bases: list[str]) -> list[str]:
    return [n for base in bases for n in (base, f"{base}_0")]


def _iter_layers(model: Any) -> list[Any]:
    """The model's layers, nested models' layers included (depth first), each once."""
    seen: set[int] = set()
    found: list[Any] = []

    def visit(layer: Any) -> None:
        for sub in getattr(layer, "layers", None) or ():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            if getattr(sub, "layers", None):
                visit(sub)
            else:
                found.append(sub)

    visit(model)
    return found


__all__ = ["KerasHook"]


def _tf_strategy_rank() -> tuple[int, int] | None:
    """(rank, world size) from the TensorFlow distribution strategy in scope, when it spans workers
    (MultiWorkerMirroredStrategy: its cluster resolver, which reads TF_CONFIG or a cluster manager)."""
    tf = sys.modules.get("tensorflow")
    if tf is None or not tf.distribute.has_strategy():
        return None
    resolver = getattr(tf.distribute.get_strategy(), "cluster_resolver", None)
    if resolver is None:
        return None
    try:
        spec = resolver.cluster_spec().as_dict()
        task = (str(resolver.task_type), int(resolver.task_id))
    except (AttributeError, TypeError, ValueError):
        return None
    order = [(t, i) for t in workers.TRAINING_TASKS for i in range(len(spec.get(t, [])))]
    return (order.index(task), len(order)) if task in order and len(order) > 1 else None


def _unnamed_worker(backend: str) -> str | None:
    """Why this process cannot tell which worker it is although it runs among several, or None."""
    task = workers.tf_config_task(os.environ)
    if task is not None and workers.tf_config_rank(os.environ) is None:
        return (f"TF_CONFIG makes this process a {task[0]!r} task, which has no training rank "
                f"(only {', '.join(workers.TRAINING_TASKS)} tasks are numbered)")
    if workers.environment_rank(os.environ) is not None or backend in ("torch", "jax"):
        return None  # named from the environment, or by torch.distributed / jax at the first step
    hosts = os.environ.get("SM_HOST_COUNT", "1")
    if hosts.isdigit() and int(hosts) > 1:
        return (f"it runs on one of {hosts} hosts but neither TF_CONFIG nor a launcher (RANK, "
                "OMPI_COMM_WORLD_RANK) says which worker it is (a multi-worker strategy without TF_CONFIG is "
                "named at the first step from its cluster resolver); only one process writes the trial")
    return None
