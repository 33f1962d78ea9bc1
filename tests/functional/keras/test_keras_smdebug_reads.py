"""Real smdebug 1.0.34 reads what KerasHook writes from model.fit/evaluate/predict: names, steps, modes, values."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.functional.keras.conftest import ALL
from tests.trial_dump import dump_with_format, dump_with_smdebug, dump_with_trials


@pytest.mark.smdebug
@pytest.mark.slow
@pytest.mark.parametrize("label", ["torch", "tf-graph", "tf-jit"])
def test_smdebug_reads_a_keras_hook_trial(run_scenario, smdebug_python: Path, tmp_path: Path, label: str) -> None:
    backend = "torch" if label == "torch" else "tensorflow"
    trial, result = run_scenario(backend, "fit:jit" if label == "tf-jit" else "fit:graph", collections=ALL)
    assert result["failure"] == "None"
    theirs = dump_with_smdebug(smdebug_python, trial, tmp_path)
    ours = dump_with_format(trial)
    assert theirs["modes"] == ours["modes"]
    assert theirs["steps"]["TRAIN"] == list(range(8)) and theirs["steps"]["EVAL"] == list(range(6))
    assert theirs["steps"]["PREDICT"] == [0, 1]
    assert theirs["steps"] == ours["steps"]
    epoch_ends = [s for s, (mode, _) in theirs["mode_of_step"].items() if mode == "GLOBAL"]
    assert len(epoch_ends) == 2  # the epoch-end logs (val_loss...) of both epochs
    assert theirs["mode_of_step"] == ours["mode_of_step"]
    assert theirs["tensor_names"] == ours["tensor_names"]
    assert {"dense/weights/dense/kernel:0", "gradients/dense/kernelGrad", "dense/relu_output", "dense_1/outputs",
            "loss", "val_loss", "mae", "predictions", "sgd/iteration:0"} <= set(theirs["tensor_names"])
    assert theirs["tensors"] == ours["tensors"]  # every value, bit for bit
    mine = dump_with_trials(trial)
    for key in ("tensor_names", "modes", "steps", "mode_of_step", "tensors"):
        assert mine[key] == ours[key], key
