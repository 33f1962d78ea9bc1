"""Code written for smdebug's PyTorch and framework-free hooks runs with the import prefix changed.

Each test is a pattern from smdebug's documentation or its own tests, written here from scratch, as a user
hits it. Trials are compared with what real smdebug 1.0.34 reads from them (same names, steps, modes, values).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import sdk_ext.pytorch as smd
from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import Collection, SaveConfig, SaveConfigMode
from sdk_ext.hooks import Hook as FrameworkFreeHook
from sdk_ext.modes import ModeKeys
from tests.functional.pytorch.models import Net, batches, train
from tests.trial_dump import decode_value_json, dump_with_format, dump_with_smdebug, dump_with_trials


@pytest.fixture(autouse=True)
def _no_process_hook() -> None:
    smd.del_hook()


def same_as_smdebug(trial: Path, smdebug_python: Path, tmp_path: Path) -> dict:  # type: ignore[type-arg]
    """What smdebug reads from ``trial``, after checking that sdk_ext reads the same."""
    theirs = dump_with_smdebug(smdebug_python, trial, tmp_path)
    ours, mine = dump_with_format(trial), dump_with_trials(trial)
    for key in ("tensor_names", "workers", "modes", "steps", "mode_of_step", "tensors"):
        assert theirs[key] == ours[key] == mine[key], key
    return theirs


def value(dump: dict, name: str, step: int) -> list:  # type: ignore[type-arg]
    return decode_value_json(dump["tensors"][name][str(step)]["worker_0"]["value"]).tolist()


# --- 1. include_collections may name collections made later ------------------------------------------


@pytest.mark.smdebug
def test_custom_collections_named_in_include_collections_are_filled_after_construction(
    tmp_path: Path, smdebug_python: Path
) -> None:
    out = tmp_path / "trial"
    hook = smd.Hook(out, save_config=SaveConfig(save_steps=[0, 2]),
                    include_collections=["relu_activations", "fc2_io", "custom"])
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.get_collection("relu_activations").add_module_tensors(model.relu)
    hook.get_collection("fc2_io").include("^fc2_(input|output)_")
    hook.register_module(model)
    for step, (x, y) in enumerate(batches(3)):
        loss_fn(model(x), y).backward()
        hook.save_tensor("my_metric", torch.tensor([float(step)]), collections_to_write="custom")
    hook.close()
    assert hook.failure is None
    theirs = same_as_smdebug(out, smdebug_python, tmp_path)
    assert theirs["steps"]["GLOBAL"] == [0, 2]
    assert {"relu_output_0", "fc2_input_0", "fc2_output_0", "my_metric"} <= set(theirs["tensor_names"])
    assert value(theirs, "my_metric", 2) == [2.0]
    collections = json.loads(next((out / "collections").rglob("*.json")).read_text())["collections"]
    assert "relu_output_0" in collections["relu_activations"]["tensor_names"]
    assert collections["custom"]["tensor_names"] == ["my_metric"]


@pytest.mark.parametrize("name", ["scalars", "metrics", "feature_importance", "trees", "sm_metrics"])
def test_builtin_names_of_other_frameworks_are_accepted_by_the_constructor(tmp_path: Path, name: str) -> None:
    hook = smd.Hook(tmp_path / name, include_collections=[name])
    assert name in hook.include_collections and name in hook.get_collections()
    hook.close()


def test_a_still_empty_included_collection_gets_one_warning_with_did_you_mean(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="sdk_ext")
    hook = smd.Hook(tmp_path, save_config=SaveConfig(save_interval=1),
                    include_collections=["relu_activation"], collections=[Collection("relu_activations", include_regex="relu")])
    model = Net()
    hook.register_module(model)
    train(model, nn.CrossEntropyLoss(), batches(3), hook=hook)
    hook.close()
    warnings = [r.getMessage() for r in caplog.records if "relu_activation'" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once, at the first saved step, not at every step
    assert "did you mean 'relu_activations'" in warnings[0]
    assert not hook.disabled or hook.closed
    assert hook.failure is None  # a warning, never an exception into training


def test_malformed_configuration_still_raises_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a valid Python regex"):
        smd.Hook(tmp_path, include_regex=["(unclosed"])
    with pytest.raises(ConfigError, match="save_interval must be a positive integer"):
        smd.Hook(tmp_path, save_config=SaveConfig(save_interval=0))
    with pytest.raises(ConfigError, match="include_collections items must be strings"):
        smd.Hook(tmp_path, include_collections=[["weights"]])
    assert list(tmp_path.iterdir()) == []


# --- 2. torch.save(model) with a registered hook ----------------------------------------------------------


def test_a_model_with_a_registered_hook_pickles_and_unpickles_without_the_hook(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    hook = smd.Hook(out, save_config=SaveConfig(save_interval=1), include_collections=["weights", "relu"],
                    collections=[Collection("relu", include_regex="relu_output")])
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    x, y = batches(1)[0]
    loss_fn(model(x), y).backward()  # mid-step: the submodule forward hooks of a saved step are attached
    torch.save(model, tmp_path / "during.pt")
    hook.close()
    torch.save(model, tmp_path / "after.pt")
    torch.save(model.state_dict(), tmp_path / "weights.pt")
    steps_before = dump_with_format(out)["steps"]
    for name in ("during.pt", "after.pt"):
        loaded = torch.load(tmp_path / name, weights_only=False)
        assert torch.equal(loaded(x), model(x))  # runs; its callbacks do nothing
        callbacks = list(loaded._forward_pre_hooks.values())
        assert len(callbacks) == 1 and not isinstance(getattr(callbacks[0], "__self__", None), smd.Hook)
        assert callbacks[0](loaded, (x,)) is None  # the placeholder's no-op
    assert dump_with_format(out)["steps"] == steps_before  # the loaded models wrote nothing
    state = torch.load(tmp_path / "weights.pt")
    assert set(state) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}


# --- 3. values given at a step that saves nothing ---------------------------------------------------------


@pytest.mark.smdebug
def test_scalars_are_written_at_the_step_and_mode_given_even_when_it_saves_nothing_else(
    tmp_path: Path, smdebug_python: Path
) -> None:
    out = tmp_path / "trial"
    hook = smd.Hook(out, save_config=SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_steps=[0, 2]),
                                                 ModeKeys.EVAL: SaveConfigMode(save_steps=[0])}),
                    include_collections=["losses"])
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.save_scalar("num_steps", 4, timestamp=1234.5)  # before the first forward: goes with it
    hook.set_mode(ModeKeys.TRAIN)
    for step, (x, y) in enumerate(batches(4)):  # global 0-3, TRAIN 0-3; steps 1 and 3 save nothing else
        loss_fn(model(x), y).backward()
        hook.save_scalar("lr", 0.1 * (step + 1))
    hook.save_scalar("after_train", 1)  # after the last saved TRAIN step: at TRAIN step 3
    hook.set_mode(ModeKeys.EVAL)
    with torch.no_grad():
        for x, y in batches(2, seed=5):  # global 4-5, EVAL 0-1
            loss_fn(model(x), y)
    hook.save_scalar("before_close", 7)  # just before close(): at EVAL step 1
    hook.close()
    theirs = same_as_smdebug(out, smdebug_python, tmp_path)
    assert theirs["steps"] == {"GLOBAL": [0, 1, 2, 3, 4, 5], "TRAIN": [0, 1, 2, 3], "EVAL": [0, 1]}
    assert sorted(theirs["tensors"]["scalar/lr"]) == ["0", "1", "2", "3"]
    assert [value(theirs, "scalar/lr", s)[0] for s in range(4)] == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert sorted(theirs["tensors"]["scalar/num_steps"]) == ["0"] and value(theirs, "scalar/num_steps", 0) == [4]
    assert sorted(theirs["tensors"]["scalar/after_train"]) == ["3"]
    assert sorted(theirs["tensors"]["scalar/before_close"]) == ["5"]
    assert theirs["mode_of_step"]["3"] == ["TRAIN", 3] and theirs["mode_of_step"]["5"] == ["EVAL", 1]
    assert sorted(theirs["tensors"]["CrossEntropyLoss_output_0"]) == ["0", "2", "4"]  # the save config holds


def test_framework_free_scalar_given_at_an_unsaved_step_is_kept(tmp_path: Path) -> None:
    hook = FrameworkFreeHook(tmp_path, save_config=SaveConfig(save_interval=10))
    for i in range(3):
        with hook.step():
            hook.save_scalar("loss", 1.0 / (i + 1))
            hook.save_tensor("w", np.full(2, i, dtype=np.float32), collections_to_write="weights")
    hook.close()
    dump = dump_with_format(tmp_path)
    assert sorted(dump["tensors"]["scalar/loss"]) == ["0", "1", "2"]
    assert sorted(dump["tensors"]["w"]) == ["0"]  # save_tensor follows the collection's save config


# --- 4. debughookconfig.json keys smdebug accepts ---------------------------------------------------------


def test_smdebug_example_config_with_s3path_loads_and_ignored_keys_warn_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {
        "S3Path": "s3://bucket/prefix",  # in smdebug's own example configs
        "S3OutputPath": "s3://bucket/prefix",
        "LocalPath": str(tmp_path / "trial"),
        "HookParameters": {"save_all": False, "save_steps": "0, 1", "save_inteval": "5"},
        "CollectionConfigurations": [{"CollectionName": "weights"},
                                     {"CollectionName": "ReluActivation", "CollectionParameters": {"include_regex": "relu*"}}],
    }
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(config))
    caplog.set_level(logging.WARNING, logger="sdk_ext")
    hook = smd.Hook.create_from_json_file(str(path))
    ignored = [r.getMessage() for r in caplog.records if "ignoring keys" in r.getMessage()]
    assert len(ignored) == 1
    assert "'S3Path'" in ignored[0] and "'save_inteval'; did you mean 'save_interval'?" in ignored[0]
    assert "S3OutputPath" not in ignored[0]  # SageMaker always writes it
    assert hook.out_dir == str(tmp_path / "trial")
    assert hook.get_collection("ReluActivation").include_regex == ["relu*"]
    model = Net()
    hook.register_module(model)
    train(model, nn.CrossEntropyLoss(), batches(3), hook=hook)
    hook.close()
    assert dump_with_format(tmp_path / "trial")["steps"]["GLOBAL"] == [0, 1, 2]  # 0 and 1 saved; 2 holds the lr scalar
    assert sorted(dump_with_format(tmp_path / "trial")["tensors"]["Net_fc1.weight"]) == ["0", "1"]


def test_a_config_no_training_job_can_produce_is_still_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"LocalPath": str(tmp_path / "t"), "HookParameters": {"save_interval": "often"},
                                "CollectionConfigurations": [{"CollectionParameters": {}}]}))
    with pytest.raises(ConfigError) as err:
        smd.Hook.create_from_json_file(str(path))
    assert "save_interval" in str(err.value) and "has no CollectionName" in str(err.value)


# --- 5. tensorboard_dir -------------------------------------------------------------------------------------


def test_tensorboard_dir_defaults_to_out_dir_tensorboard(tmp_path: Path) -> None:
    assert smd.Hook(tmp_path / "a").tensorboard_dir is None
    hook = smd.Hook(tmp_path / "b", export_tensorboard=True, save_config=SaveConfig(save_interval=1),
                    include_collections=["losses"])
    assert hook.tensorboard_dir == os.path.join(hook.out_dir, "tensorboard")
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    train(model, loss_fn, batches(2), hook=hook)
    hook.close()
    assert list(Path(hook.tensorboard_dir).rglob("*tfevents*"))
    assert smd.Hook(tmp_path / "c", tensorboard_dir=str(tmp_path / "tb")).tensorboard_dir == str(tmp_path / "tb")


# --- 6. del_hook, _get_worker_name, _cleanup --------------------------------------------------------------


def test_del_hook_worker_name_and_cleanup(tmp_path: Path) -> None:
    hook = smd.Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    assert smd.get_hook() is hook
    assert hook._get_worker_name() == "worker_0"  # before the first step, too
    model = Net()
    hook.register_module(model)
    train(model, nn.CrossEntropyLoss(), batches(2), hook=hook)
    smd.del_hook()
    assert smd.get_hook() is None
    hook._cleanup()  # smdebug's name for close()
    assert hook.closed and (tmp_path / "training_job_end.ts").exists()
    assert hook._get_worker_name() == "worker_0"
