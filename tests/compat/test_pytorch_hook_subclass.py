"""Users subclass smdebug's PyTorch hook: the extension points run exactly when smdebug runs them.

The subclasses below reproduce, in our own code, the patterns of SageMaker Debugger's public example
notebooks: class activation maps (``CustomHook.image_gradients`` registers ``backward_hook("image")`` on the
input batch; ``forward_hook`` saves module inputs/outputs with ``_write_inputs``/``_write_outputs``, registers
``backward_hook`` on outputs during EVAL and saves BatchNorm running statistics), and pruning (a
``written_tensors`` dict keyed by ``self.step``). The trials are checked with what the notebooks then read,
and with what real smdebug 1.0.34 reads from them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import sdk_ext.pytorch as smd
from sdk_ext.core.modes import ModeKeys
from sdk_ext.exceptions import SMDebugNotImplementedError, TensorUnavailableForStep
from sdk_ext.trials import create_trial
from tests.compat.test_smdebug_dropin_hooks import same_as_smdebug


@pytest.fixture(autouse=True)
def _no_process_hook() -> None:
    smd.del_hook()


class TinyResNet(nn.Module):
    """Conv -> BatchNorm -> ReLU -> Linear: the layers the class-activation-map analysis reads."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn1 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=False)  # the notebook turns ReLUs out of place to keep gradients
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.relu(self.bn1(self.conv(x))).flatten(1))


class SaliencyHook(smd.Hook):
    """The class-activation-map notebook's hook, in our own words."""

    def image_gradients(self, image: torch.Tensor) -> None:
        image.register_hook(self.backward_hook("image"))

    def forward_hook(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        module_name = self.module_maps[module]
        self._write_inputs(module_name, inputs)
        if self.mode == ModeKeys.EVAL:  # gradients of outputs only while validating (costly)
            outputs.register_hook(self.backward_hook(module_name + "_output"))
            if isinstance(module, nn.BatchNorm2d):
                self._write_outputs(module_name + ".running_mean", module.running_mean)
                self._write_outputs(module_name + ".running_var", module.running_var)
        self._write_outputs(module_name, outputs)
        self.last_saved_step = self.step


def train_and_validate(hook: smd.Hook, *, rounds: int = 3) -> None:
    torch.manual_seed(0)
    model, loss_fn = TinyResNet(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(1)
    for _ in range(rounds):
        hook.set_mode(ModeKeys.TRAIN)
        x, y = torch.randn(2, 3, 6, 6, generator=g), torch.tensor([0, 3])
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        hook.set_mode(ModeKeys.EVAL)
        image = torch.randn(2, 3, 6, 6, generator=g, requires_grad=True)
        if isinstance(hook, SaliencyHook):
            hook.image_gradients(image)
        loss_fn(model(image), y).backward()  # saliency: gradients w.r.t. the image and the features
    hook.close()


def saliency_hook(out: Path) -> SaliencyHook:
    hook = SaliencyHook(out, save_config=smd.SaveConfig({ModeKeys.TRAIN: smd.SaveConfigMode(save_interval=100),
                                                         ModeKeys.EVAL: smd.SaveConfigMode(save_interval=1)}),
                        include_collections=["custom_collection"])
    hook.get_collection("custom_collection").include(
        [".*bn", ".*bias", ".*TinyResNet_input", ".*image", ".*fc_output", ".*CrossEntropyLoss"])
    return hook


@pytest.mark.smdebug
def test_class_activation_map_hook_saves_what_the_saliency_analysis_reads(tmp_path: Path, smdebug_python: Path) -> None:
    out = tmp_path / "trial"
    hook = saliency_hook(out)
    train_and_validate(hook)
    assert hook.failure is None
    assert hook.last_saved_step == 5 and isinstance(hook.last_saved_step, int)

    trial = create_trial(str(out))
    assert trial.steps(mode=ModeKeys.EVAL) == [0, 1, 2] and trial.steps(mode=ModeKeys.TRAIN) == [0]
    # the notebook's selections
    gradients = trial.tensor_names(regex=".*gradient.*bn.*output")
    biases = trial.tensor_names(regex="^(?=.*bias)(?:(?!fc).)*$")
    assert gradients == ["gradient/bn1_output"]
    assert biases == ["TinyResNet_bn1.bias", "TinyResNet_conv.bias", "gradient/TinyResNet_bn1.bias",
                      "gradient/TinyResNet_conv.bias"]
    assert trial.tensor_names(regex=".*running_mean") == ["bn1.running_mean_output_0"]
    for step in trial.steps(mode=ModeKeys.EVAL):
        image = trial.tensor("TinyResNet_input_0").value(step, mode=ModeKeys.EVAL)
        image_gradient = trial.tensor("gradient/image").value(step, mode=ModeKeys.EVAL)
        feature_gradient = trial.tensor("gradient/bn1_output").value(step, mode=ModeKeys.EVAL)
        assert image.shape == image_gradient.shape == (2, 3, 6, 6)
        assert feature_gradient.shape == (2, 4, 4, 4) and np.abs(image_gradient).sum() > 0
        assert trial.tensor("fc_output_0").value(step, mode=ModeKeys.EVAL).shape == (2, 5)
    # outputs' gradients and running statistics only during EVAL, as the override says
    with pytest.raises(TensorUnavailableForStep):
        trial.tensor("gradient/image").value(0, mode=ModeKeys.TRAIN)
    assert trial.tensor("bn1.running_var_output_0").steps(mode=ModeKeys.TRAIN) == []

    smdebug_reads = same_as_smdebug(out, smdebug_python, tmp_path)
    assert {"gradient/image", "gradient/bn1_output", "bn1.running_mean_output_0"} <= set(smdebug_reads["tensor_names"])


class PruningHook(smd.Hook):
    """The pruning notebook's hook: numbers repeated calls of a module within a step (``written_tensors``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.written_tensors: dict[int, dict[str, int]] = {}

    def forward_hook(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        module_name = module._module_name
        outputs.register_hook(self.backward_hook(module_name + "_" + module._get_name() + "_output"))
        calls = self.written_tensors.setdefault(self.step, {})
        calls[module_name] = calls.get(module_name, -1) + 1
        numbered = f"{module_name}_{calls[module_name]}"
        self._write_inputs(numbered, inputs)
        self._write_outputs(numbered, outputs)


def test_pruning_hook_keys_steps_by_hook_step_and_numbers_each_call(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    hook = PruningHook(out, save_config=smd.SaveConfig(save_interval=1), include_collections=["custom"])
    hook.get_collection("custom").include(["conv_", "gradient/conv"])
    train_and_validate(hook, rounds=2)
    assert hook.failure is None
    # hook.step is the global step, an int: the dict holds one entry per step, as under smdebug
    assert sorted(hook.written_tensors) == [0, 1, 2, 3]
    assert all(type(k) is int or isinstance(k, int) for k in hook.written_tensors)
    assert hook.written_tensors[0]["conv"] == 0
    trial = create_trial(str(out))
    assert {"conv_0_input_0", "conv_0_output_0", "gradient/conv_Conv2d_output"} <= set(trial.tensor_names())
    assert trial.tensor("gradient/conv_Conv2d_output").steps() == [0, 1, 2, 3]


class Counting(smd.Hook):
    """Counts when the extension points run (and keeps the default behaviour)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: Counter[tuple[str, int]] = Counter()

    def forward_pre_hook(self, module: nn.Module, inputs: Any) -> None:
        super().forward_pre_hook(module, inputs)
        self.calls[("pre", self.step)] += 1

    def forward_hook(self, module: nn.Module, inputs: Any, outputs: Any) -> None:
        self.calls[("forward", self.step)] += 1
        super().forward_hook(module, inputs, outputs)

    def backward_hook(self, tname: str) -> Any:
        save = super().backward_hook(tname)

        def back(grad: torch.Tensor) -> None:
            self.calls[("backward", self.step)] += 1
            save(grad)

        return back


def test_overrides_run_at_every_step_for_every_module_as_smdebug_calls_them(tmp_path: Path) -> None:
    only_train_step_1 = smd.SaveConfig({ModeKeys.TRAIN: smd.SaveConfigMode(save_steps=[1], start_step=1),
                                        ModeKeys.EVAL: smd.SaveConfigMode(start_step=100)})
    hook = Counting(tmp_path / "trial", save_config=only_train_step_1,
                    include_collections=["weights", "gradients", "custom"])
    hook.get_collection("custom").include("^fc_output_")
    train_and_validate(hook, rounds=2)  # global steps 0..3 (TRAIN, EVAL, TRAIN, EVAL); only 2 (TRAIN 1) saves
    modules = 4 + 1 + 1  # conv, bn1, relu, fc; the model itself; the registered loss
    params = 6  # conv, bn1 and fc weights and biases
    for step in range(4):
        assert hook.calls[("pre", step)] == 1
        assert hook.calls[("forward", step)] == modules
        assert hook.calls[("backward", step)] == params  # the closures run at every backward, saved or not
    trial = create_trial(str(tmp_path / "trial"))
    assert trial.steps() == [2]
    assert "fc_output_0" in trial.tensor_names() and "gradient/TinyResNet_fc.weight" in trial.tensor_names()


def test_backward_hook_of_a_plain_hook_saves_an_input_gradient_in_saved_steps_only(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    hook = smd.Hook(out, save_config=smd.SaveConfig(save_steps=[1], start_step=1), include_collections=["gradients"])
    model = TinyResNet()
    hook.register_module(model)
    assert model.bn1._module_name == "bn1" and model._module_name == "TinyResNet"
    assert model.bn1 in hook.module_set and hook.module_maps[model.fc] == "fc"
    for _ in range(3):
        image = torch.randn(1, 3, 6, 6, requires_grad=True)
        image.register_hook(hook.backward_hook("image"))
        model(image).sum().backward()
    hook.close()
    trial = create_trial(str(out))
    assert trial.tensor("gradient/image").steps() == [1]
    assert trial.tensor("gradient/image").value(1).shape == (1, 3, 6, 6)


@pytest.mark.parametrize("internal", ["_save_for_tensor", "_write_reductions", "_prepare_collections", "fhook"])
def test_overriding_an_internal_the_hook_never_calls_fails_at_construction(tmp_path: Path, internal: str) -> None:
    def override(self: Any, *args: Any) -> None:
        raise AssertionError("never called")

    subclass = type("MyHook", (smd.Hook,), {internal: override})
    with pytest.raises(SMDebugNotImplementedError, match=rf"MyHook overrides .*{internal}") as raised:
        subclass(tmp_path / "trial")
    assert "forward_hook" in str(raised.value)  # says what to override instead
    assert not (tmp_path / "trial").exists()


def test_a_subclass_that_adds_its_own_methods_is_accepted(tmp_path: Path) -> None:
    hook = SaliencyHook(tmp_path / "trial")
    assert hook.module_maps == {}
    hook.close()
