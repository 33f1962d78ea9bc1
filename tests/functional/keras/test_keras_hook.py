"""KerasHook on real model.fit/evaluate/predict runs: smdebug's names, collections and modes, on the torch
backend and the TensorFlow backend (graph, run_eagerly=True, jit_compile=True)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sdk_ext.modes import ModeKeys
from sdk_ext.trials import create_trial
from tests.functional.keras.conftest import ALL

# 64 samples / batch 16 = 4 train batches x 2 epochs; 32 validation samples = 2 EVAL batches per epoch,
# evaluate() 2 more; predict() of 16 samples by 8 = 2 PREDICT batches; one GLOBAL step per epoch end.
STEPS = {ModeKeys.TRAIN: list(range(8)), ModeKeys.EVAL: list(range(6)), ModeKeys.PREDICT: [0, 1]}


@pytest.mark.slow
@pytest.mark.parametrize("label", ["torch", "tf-graph"])
def test_fit_evaluate_predict_saves_smdebugs_names_collections_and_modes(run_scenario, label) -> None:
    backend = "torch" if label == "torch" else "tensorflow"
    trial_dir, result = run_scenario(backend, "fit:graph", collections=ALL)
    assert result["failure"] == "None" and result["backend"] == backend
    trial = create_trial(str(trial_dir))
    names = set(trial.tensor_names())
    layers = {"dense": "relu", "dense_1": "tanh", "dense_2": None}
    expected = {"loss", "mae", "batch", "val_loss", "val_mae", "inputs", "labels", "predictions",
                "sgd/iteration:0", "sgd/learning_rate:0"}
    for layer, act in layers.items():
        expected |= {f"{layer}/weights/{layer}/kernel:0", f"{layer}/weights/{layer}/bias:0",
                     f"gradients/{layer}/kernelGrad", f"gradients/{layer}/biasGrad",
                     f"{layer}/inputs", f"{layer}/outputs"}
        if act:
            expected |= {f"{layer}/{act}_input", f"{layer}/{act}_output"}
    assert names == expected
    coll = {c: set(trial.collection(c).tensor_names) for c in
            ("weights", "biases", "gradients", "losses", "metrics", "optimizer_variables", "layers", "inputs", "outputs")}
    assert coll["weights"] == {f"{n}/weights/{n}/kernel:0" for n in layers}
    assert coll["biases"] == {f"{n}/weights/{n}/bias:0" for n in layers}
    assert coll["gradients"] == {f"gradients/{n}/{v}Grad" for n in layers for v in ("kernel", "bias")}
    assert coll["losses"] == {"loss", "val_loss"}
    assert coll["metrics"] == {"mae", "val_mae", "batch"}  # batch: the batch index, as smdebug saved it
    assert coll["optimizer_variables"] == {"sgd/iteration:0", "sgd/learning_rate:0"}
    assert coll["inputs"] == {"inputs"} and coll["outputs"] == {"labels", "predictions"}
    assert "dense/outputs" in coll["layers"] and "dense_1/tanh_input" in coll["layers"]
    for mode, steps in STEPS.items():
        assert trial.steps(mode=mode) == steps, mode
    # gradients only in TRAIN; predictions in every mode; val_* at the epoch-end (GLOBAL) steps
    grad = trial.tensor("gradients/dense/kernelGrad")
    assert grad.steps(mode=ModeKeys.TRAIN) == STEPS[ModeKeys.TRAIN] and not grad.steps(mode=ModeKeys.EVAL)
    assert trial.tensor("predictions").steps(mode=ModeKeys.PREDICT) == [0, 1]
    assert trial.tensor("predictions").value(0, mode=ModeKeys.PREDICT).shape == (8, 1)
    val = trial.tensor("val_loss")
    assert len(val.steps()) == 2 and all(trial.mode_modestep(s)[0] == ModeKeys.GLOBAL for s in val.steps())
    # the layer tensors are what the layers computed: relu output = max(relu input, 0), next layer's input
    step = trial.steps(mode=ModeKeys.TRAIN)[3]
    pre = trial.tensor("dense/relu_input").value(step)
    out = trial.tensor("dense/outputs").value(step)
    np.testing.assert_array_equal(trial.tensor("dense/relu_output").value(step), out)
    np.testing.assert_allclose(out, np.maximum(pre, 0), atol=1e-6)
    np.testing.assert_array_equal(trial.tensor("dense_1/inputs").value(step), out)
    assert trial.tensor("inputs").value(step).shape == (16, 6)
    assert trial.tensor("labels").value(step).shape == (16, 1)


def _worst_sgd_residual(trial, lr: float, weight_offset: int = 0) -> tuple[float, int]:
    """max |w[s] - w[s-1] + lr * g[s]| over every variable and consecutive TRAIN steps; and the count."""
    worst, checked = 0.0, 0
    steps = trial.steps(mode=ModeKeys.TRAIN)
    for name in trial.tensor_names(collection="gradients"):
        key = name[len("gradients/"):-len("Grad")]
        layer, _, var = key.rpartition("/")
        w = trial.tensor(f"{layer}/weights/{layer}/{var}:0")
        g = trial.tensor(name)
        for prev, cur in itertools.pairwise(steps):
            if cur not in g.steps(mode=ModeKeys.TRAIN):
                continue
            w0 = w.value(prev + weight_offset, mode=ModeKeys.TRAIN)
            w1 = w.value(cur + weight_offset, mode=ModeKeys.TRAIN)
            gs = g.value(cur, mode=ModeKeys.TRAIN)
            worst = max(worst, float(np.abs(w1 - w0 + lr * gs).max()))
            checked += 1
    return worst, checked


@pytest.mark.slow
@pytest.mark.parametrize("label", ["torch", "tf-graph", "tf-eager", "tf-jit"])
def test_saved_gradients_are_the_applied_ones(run_scenario, label) -> None:
    """Plain SGD: w[s] = w[s-1] - lr * g[s] for every variable and step, within 1e-6."""
    backend = "torch" if label == "torch" else "tensorflow"
    mode = label.split("-")[1] if "-" in label else "graph"
    trial_dir, result = run_scenario(backend, f"fit:{mode}")
    assert result["failure"] == "None"
    assert result["graph_stash"] is (label in ("tf-graph", "tf-jit"))  # compiled steps used the stash
    assert result["model_run_eagerly"] is (label == "tf-eager")
    worst, checked = _worst_sgd_residual(create_trial(str(trial_dir)), result["lr"])
    assert checked == 6 * 7  # 6 variables x 7 consecutive pairs of the 8 TRAIN steps
    assert worst <= 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("label", ["torch", "tf-graph", "tf-jit"])
def test_gradients_every_other_step_are_that_steps_gradients(run_scenario, label) -> None:
    """Gradients saved every 2nd step (weights every step): a saved gradient is its own step's, never one
    left over from an earlier step, and the steps between save no gradient."""
    backend = "torch" if label == "torch" else "tensorflow"
    mode = "jit" if label == "tf-jit" else "graph"
    trial_dir, result = run_scenario(backend, f"fit:{mode}", grad_interval="2")
    assert result["failure"] == "None"
    trial = create_trial(str(trial_dir))
    assert trial.tensor("gradients/dense/kernelGrad").steps(mode=ModeKeys.TRAIN) == [0, 2, 4, 6]
    worst, checked = _worst_sgd_residual(trial, result["lr"])
    assert checked == 6 * 3 and worst <= 1e-6
    if label != "torch":
        # the last TRAIN step (7) saved no gradient: the stash still holds step 6's (nothing was copied)
        last = trial.tensor("gradients/dense/kernelGrad").value(6, mode=ModeKeys.TRAIN)
        np.testing.assert_array_equal(np.asarray(result["stash"]["gradients/dense/kernelGrad"], dtype=last.dtype), last)


@pytest.mark.slow
@pytest.mark.parametrize("label", ["tf-graph", "tf-jit"])
def test_a_compiled_step_that_saves_layers_runs_eagerly_and_the_others_stay_compiled(run_scenario, label) -> None:
    trial_dir, result = run_scenario("tensorflow", f"fit:{label[3:]}", collections="layers,gradients,weights",
                                     interval="3")
    assert result["failure"] == "None" and result["graph_stash"] is True and result["model_run_eagerly"] is False
    trial = create_trial(str(trial_dir))
    assert trial.tensor("dense/outputs").steps(mode=ModeKeys.TRAIN) == [0, 3, 6]
    assert result["eager_steps"] == {"train": 3, "test": 2, "predict": 1}  # only the saved steps ran eagerly


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["custom-tf:tape", "custom-tf:graph", "custom-tf:graph-jit", "custom-torch"])
def test_custom_training_loops(run_scenario, scenario) -> None:
    backend = "torch" if scenario == "custom-torch" else "tensorflow"
    trial_dir, result = run_scenario(backend, scenario)
    assert result["failure"] == "None"
    trial = create_trial(str(trial_dir))
    assert trial.steps(mode=ModeKeys.GLOBAL) == [0, 1, 2, 3]
    assert {"loss", "gradients/dense/kernelGrad", "dense_2/weights/dense_2/bias:0"} <= set(trial.tensor_names())
    # wrap_tape saves the variables when the gradient is taken (before the update): w[s+1] = w[s] - lr g[s]
    offset = 1 if scenario == "custom-tf:tape" else 0
    worst, checked = _worst_sgd_residual_global(trial, result["lr"], offset)
    assert checked == 6 * 3 and worst <= 1e-6
    if scenario == "custom-tf:graph":
        assert result["graph_stash"] is True
        assert trial.tensor("scalar/batch_loss").steps() == [0, 1, 2, 3]


def _worst_sgd_residual_global(trial, lr: float, offset: int) -> tuple[float, int]:
    worst, checked = 0.0, 0
    steps = trial.steps()
    for name in trial.tensor_names(collection="gradients"):
        key = name[len("gradients/"):-len("Grad")]
        layer, _, var = key.rpartition("/")
        w, g = trial.tensor(f"{layer}/weights/{layer}/{var}:0"), trial.tensor(name)
        for prev, cur in itertools.pairwise(steps):
            if offset:  # weights at a step are from before that step's update
                w0, w1, gs = w.value(prev), w.value(cur), g.value(prev)
            else:
                w0, w1, gs = w.value(prev), w.value(cur), g.value(cur)
            worst = max(worst, float(np.abs(w1 - w0 + lr * gs).max()))
            checked += 1
    return worst, checked


@pytest.mark.slow
@pytest.mark.parametrize("label", ["torch", "tf-jit"])
def test_a_failing_hook_never_stops_training(run_scenario, label) -> None:
    backend = "torch" if label == "torch" else "tensorflow"
    _, result = run_scenario(backend, "fit-broken:graph" if label == "torch" else "fit-broken:jit")
    assert result["epochs"] == 2 and result["disabled"] is True
    assert "disk full" in result["failure"]
