"""smdebug's Keras custom-loop examples, ported by the import prefix, as a user meets them (TensorFlow backend):

* a ``save_scalar`` before the first ``wrap_tape`` step is filed with step 0, and the training steps are
  numbered 0, 1, 2... in TRAIN mode, as smdebug numbers them (``value(0)`` is the first batch's loss);
* with ``wrap_optimizer`` + ``register_model`` + ``wrap_tape``, the included ``inputs``, ``outputs`` and
  ``optimizer_variables`` hold the batch, the logits (next to the labels the script saves) and the optimizer's
  state; without them, one warning per empty collection says what to add;
* Keras 3's ``seed_generator_state`` (a Dropout layer's RNG state, in ``model.variables`` but not in
  ``model.weights``) is a weight on neither the tape path nor the fit path;
* ``get_hook("keras", create_if_not_exists=True)`` returns the hook of the SageMaker config.

The loops run in one subprocess (tests/compat/keras_custom_loops.py); real smdebug 1.0.34 reads the trial.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.modes import ModeKeys
from sdk_ext.trials import create_trial
from tests.trial_dump import decode_value_json, dump_with_smdebug

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None and os.environ.get("SDK_EXT_REQUIRE_KERAS") != "1",
                       reason="needs the tensorflow extra"),
]


@pytest.fixture(scope="module")
def loops(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("keras-loops")
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.pop("SMDEBUG_CONFIG_FILE_PATH", None)
    proc = subprocess.run([sys.executable, "-m", "tests.compat.keras_custom_loops", str(out)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-6000:]
    result = json.loads((out / "result.json").read_text())
    assert result["backend"] == "tensorflow"
    return out, result


def test_a_scalar_before_the_first_tape_step_is_filed_with_step_zero(loops: tuple[Path, dict[str, Any]]) -> None:
    out, result = loops
    trial = create_trial(str(out / "full" / "trial"))
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3] and trial.modes() == [ModeKeys.TRAIN]
    scalar = trial.tensor("scalar/num_training_samples")
    assert scalar.steps() == [0] and scalar.value(0).tolist() == [64]
    loss = trial.tensor("loss")
    assert loss.steps() == [0, 1, 2, 3]
    for step, expected in enumerate(result["full"]["losses"]):  # step s is the s-th batch, as in smdebug
        assert loss.value(step)[0] == pytest.approx(expected, rel=1e-6)
        assert loss.value(step, mode=ModeKeys.TRAIN)[0] == pytest.approx(expected, rel=1e-6)


def test_inputs_outputs_and_optimizer_variables_of_a_registered_model(loops: tuple[Path, dict[str, Any]]) -> None:
    out, result = loops
    assert result["full"]["failure"] == "None" and result["full"]["warnings"] == []
    trial = create_trial(str(out / "full" / "trial"))
    assert trial.tensor_names(collection="inputs") == ["inputs"]
    assert trial.tensor_names(collection="outputs") == ["predictions", "y_labels"]
    x = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")  # the loop's data (keras_custom_loops.data)
    for step in range(4):
        np.testing.assert_array_equal(trial.tensor("inputs").value(step), x[step * 16:(step + 1) * 16])
        np.testing.assert_allclose(trial.tensor("predictions").value(step), result["full"]["logits"][step],
                                   rtol=1e-6)
        assert trial.tensor("y_labels").value(step).shape == (16, 3)
    # the optimizer's own state, as smdebug's optimizer_variables (tf.keras 2's scalars); not Adam's m and v
    # of every variable it updates, which are as large as the model
    assert trial.tensor_names(collection="optimizer_variables") == ["adam/iteration:0", "adam/learning_rate:0"]
    # saved at the end of each step, after that step's update
    assert [trial.tensor("adam/iteration:0").value(s).item() for s in range(4)] == [1, 2, 3, 4]
    assert len(trial.tensor_names(collection="gradients")) == 4


def test_a_loop_that_gives_the_hook_nothing_for_a_collection_is_told_why_once(loops: tuple[Path, dict[str, Any]]
                                                                                ) -> None:
    out, result = loops
    warnings = result["bare"]["warnings"]
    assert result["bare"]["failure"] == "None"
    by_collection = {c: [w for w in warnings if f"collection {c!r}" in w] for c in
                     ("inputs", "outputs", "layers", "optimizer_variables", "gradients")}
    assert len(by_collection["inputs"]) == 1 and "hook.register_model(model)" in by_collection["inputs"][0]
    assert len(by_collection["layers"]) == 1 and "hook.register_model(model)" in by_collection["layers"][0]
    assert len(by_collection["optimizer_variables"]) == 1
    assert "hook.wrap_optimizer(optimizer)" in by_collection["optimizer_variables"][0]
    assert by_collection["outputs"] == []  # the loop saves y_labels there itself
    assert by_collection["gradients"] == []  # wrap_tape saw them
    trial = create_trial(str(out / "bare" / "trial"))
    assert trial.steps() == [0, 1, 2, 3]
    assert len(trial.tensor_names(collection="gradients")) == 4
    assert trial.tensor_names(collection="inputs") == [] and trial.tensor_names(collection="optimizer_variables") == []


def test_the_rng_state_of_dropout_is_a_weight_on_neither_path(loops: tuple[Path, dict[str, Any]]) -> None:
    out, result = loops
    expected = {"dense/weights/dense/kernel:0", "dense/weights/dense/bias:0", "dense_1/weights/dense_1/kernel:0",
                "dense_1/weights/dense_1/bias:0"}
    assert not any("seed_generator" in p for p in result["full"]["model_weights"])
    names = {}
    for loop in ("full", "bare", "fit"):
        trial = create_trial(str(out / loop / "trial"))
        names[loop] = set(trial.tensor_names(collection="weights")) | set(trial.tensor_names(collection="biases"))
        assert not any("seed_generator" in n for n in trial.tensor_names()), loop
    assert names["full"] == names["bare"] == names["fit"] == expected


def test_scalars_before_and_after_fit_make_no_training_step(loops: tuple[Path, dict[str, Any]]) -> None:
    """smdebug's tf_keras_fit_eager.py saves a scalar before fit (filed with step 0) and one after it (written
    at close, in a GLOBAL step of its own: no batch made it, so it is no TRAIN step)."""
    out, result = loops
    assert result["fit"]["failure"] == "None"
    trial = create_trial(str(out / "fit" / "trial"))
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3] and trial.steps(mode=ModeKeys.EVAL) == [0]
    assert trial.tensor("scalar/epoch").steps() == [0] and trial.mode_modestep(0) == (ModeKeys.TRAIN, 0)
    # a save_tensor before fit goes with step 0 too, and its collection counts as filled (no warning)
    assert trial.tensor("custom_tensor_1").steps() == [0]
    assert trial.tensor_names(collection="custom_coll") == ["custom_tensor_1"]
    assert result["fit"]["warnings"] == []
    last = trial.steps()[-1]
    assert trial.tensor("scalar/batch_size").steps() == [last]
    assert trial.mode_modestep(last)[0] == ModeKeys.GLOBAL
    assert trial.tensor("scalar/batch_size").value(last).tolist() == [16]
    # smdebug's metrics hold the batch index of each step too
    assert "batch" in trial.tensor_names(collection="metrics")
    assert [trial.tensor("batch").value(s, mode=ModeKeys.TRAIN).tolist() for s in range(4)] == [[0], [1], [2], [3]]


def test_get_hook_of_smdebug_tensorflow(loops: tuple[Path, dict[str, Any]]) -> None:
    _, result = loops
    got = result["get_hook"]
    assert got["kind"] == "KerasHook" and got["same"] and got["forgotten"]
    assert got["session"] == "None" and any("get_hook('keras')" in m for m in got["session_said"])


@pytest.mark.smdebug
def test_smdebug_reads_the_custom_loop_trial(loops: tuple[Path, dict[str, Any]], smdebug_python: Path,
                                             tmp_path: Path) -> None:
    out, result = loops
    theirs = dump_with_smdebug(smdebug_python, out / "full" / "trial", tmp_path)
    assert theirs["modes"] == ["TRAIN"] and theirs["steps"]["TRAIN"] == [0, 1, 2, 3]
    assert {str(s): ["TRAIN", s] for s in range(4)} == theirs["mode_of_step"]
    saved = theirs["tensors"]["scalar/num_training_samples"]
    assert list(saved) == ["0"]
    loss = theirs["tensors"]["loss"]
    for step, expected in enumerate(result["full"]["losses"]):
        value = decode_value_json(next(iter(loss[str(step)].values()))["value"])
        assert value[0] == pytest.approx(expected, rel=1e-6)
