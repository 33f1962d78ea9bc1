"""Real smdebug 1.0.34 reads a trial written by sdk_ext.pytorch.Hook: same names, steps, modes, values."""

from pathlib import Path

import pytest
import torch
from torch import nn

from sdk_ext.hooks import ReductionConfig, SaveConfig, SaveConfigMode
from sdk_ext.modes import ModeKeys
from sdk_ext.pytorch import Hook
from tests.functional.pytorch.models import Net, batches, train
from tests.trial_dump import dump_with_format, dump_with_smdebug, dump_with_trials


def write_trial(trial: Path) -> None:
    torch.manual_seed(1)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = Hook(trial, save_config=SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=2),
                                               ModeKeys.EVAL: SaveConfigMode(save_interval=1)}),
                include_collections=["weights", "biases", "gradients"], include_regex=["relu_output"],
                reduction_config=ReductionConfig(reductions=["mean"], norms=["l2"], save_raw_tensor=True))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(ModeKeys.TRAIN)
    train(model, loss_fn, batches(5), hook=hook)
    hook.set_mode(ModeKeys.EVAL)
    with torch.no_grad():
        for x, y in batches(2, seed=9):
            loss_fn(model(x), y)
    hook.close()
    assert hook.failure is None


@pytest.fixture(scope="module")
def pytorch_trial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trial = tmp_path_factory.mktemp("pt") / "trial"
    write_trial(trial)
    return trial


@pytest.mark.smdebug
def test_smdebug_reads_a_pytorch_hook_trial(pytorch_trial: Path, smdebug_python: Path, tmp_path: Path) -> None:
    trial = pytorch_trial
    theirs = dump_with_smdebug(smdebug_python, trial, tmp_path)
    ours = dump_with_format(trial)
    assert theirs["modes"] == ["EVAL", "TRAIN"]
    # every TRAIN step holds its save_scalar("lr") value; the collections save at steps 0, 2, 4
    assert theirs["steps"] == ours["steps"] == {"GLOBAL": [0, 1, 2, 3, 4, 5, 6], "TRAIN": [0, 1, 2, 3, 4], "EVAL": [0, 1]}
    assert sorted(theirs["tensors"]["scalar/lr"]) == ["0", "1", "2", "3", "4"]
    assert sorted(theirs["tensors"]["Net_fc1.weight"]) == ["0", "2", "4", "5", "6"]
    assert theirs["mode_of_step"] == ours["mode_of_step"]
    assert theirs["tensor_names"] == ours["tensor_names"]
    assert {"Net_fc1.weight", "gradient/Net_fc2.bias", "relu_output_0", "CrossEntropyLoss_output_0", "scalar/lr"} <= set(
        theirs["tensor_names"])
    assert theirs["tensors"] == ours["tensors"]  # values and stored reductions, bit for bit


def test_the_projects_reader_reads_a_pytorch_hook_trial(pytorch_trial: Path) -> None:
    mine, ours = dump_with_trials(pytorch_trial), dump_with_format(pytorch_trial)
    for key in ("tensor_names", "workers", "modes", "steps", "mode_of_step", "tensors"):
        assert mine[key] == ours[key], key
