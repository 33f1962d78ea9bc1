"""Hook.create_from_json_file with DebugHookConfig dicts as SageMaker writes them into the container."""

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import Hook
from sdk_ext.hooks.collections import BUILTIN_REGEXES
from sdk_ext.hooks.json_config import hook_kwargs_from_config
from sdk_ext.modes import ModeKeys
from tests.trial_dump import dump_with_format


def write_config(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(config))
    return path


def full_config(out: Path) -> dict[str, Any]:
    return {
        "S3OutputPath": "s3://bucket/job/debug-output",
        "LocalPath": str(out),
        "HookParameters": {"save_interval": "4", "eval.save_interval": "1", "include_regex": "custom.*,marker"},
        "CollectionConfigurations": [
            {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "2"}},
            {"CollectionName": "weights", "CollectionParameters": {"reductions": "mean,abs_l2_norm", "save_histogram": "false"}},
            {"CollectionName": "relu_output", "CollectionParameters": {"include_regex": ".*relu_output", "train.save_steps": "1"}},
            {"CollectionName": "losses"},
        ],
    }


def test_job_config_gives_the_collections_intervals_and_out_dir_it_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    out = tmp_path / "tensors"
    hook = Hook.create_from_json_file(write_config(tmp_path, full_config(out)))
    assert hook.out_dir == str(out)
    assert set(hook.include_collections) == {"losses", "gradients", "weights", "relu_output", "default"}
    eff = hook.policy.effective_save_config
    assert eff("gradients").get_save_config(ModeKeys.TRAIN).save_interval == 2
    # the collection's plain key overrides the hook's eval.save_interval
    assert eff("gradients").get_save_config(ModeKeys.EVAL).save_interval == 2
    assert eff("losses").get_save_config(ModeKeys.EVAL).save_interval == 1
    assert eff("relu_output").get_save_config(ModeKeys.TRAIN).save_steps == (1,)
    hook.set_mode(ModeKeys.TRAIN)
    for i in range(5):
        with hook.step():
            hook.save_tensor("gradient/fc.weight", np.full(2, i, np.float32), collections_to_write=())
            hook.save_tensor("fc.weight", np.array([3.0, -4.0]), collections_to_write=())
            hook.save_tensor("block.relu_output", np.ones(2), collections_to_write=())
            hook.save_tensor("MSELoss_output_0", np.float32(i), collections_to_write=())
            hook.save_tensor("other", np.ones(1), collections_to_write=())
    hook.close()
    dump = dump_with_format(out)
    t = dump["tensors"]
    assert sorted(t["gradient/fc.weight"]) == ["0", "2", "4"]
    assert sorted(t["fc.weight"]) == ["0", "4"]
    assert set(t["fc.weight"]["0"]["worker_0"]["reductions"]) == {"mean", "abs_l2"}
    assert t["fc.weight"]["0"]["worker_0"]["value"] == {"error": "TensorUnavailableForStep"}  # reductions only
    assert sorted(t["block.relu_output"]) == ["0", "1", "4"]
    assert sorted(t["MSELoss_output_0"]) == ["0", "4"]
    assert "other" not in t
    doc = json.loads((out / "collections/000000000/worker_0_collections.json").read_text())["collections"]
    assert doc["weights"]["save_histogram"] is False
    assert doc["weights"]["reduction_config"] == {"save_raw_tensor": False, "reductions": "mean,abs_l2_norm", "save_shape": False}
    assert doc["relu_output"]["include_regex"] == [".*relu_output"]
    assert doc["default"]["include_regex"] == ["custom.*", "marker"]
    assert doc["gradients"]["save_config"]["EVAL"]["save_interval"] == 2


def test_hook_reductions_mean_reductions_only_unless_raw_is_asked_for() -> None:
    kw = hook_kwargs_from_config({"HookParameters": {"reductions": "max"}}, builtin=BUILTIN_REGEXES, env={})
    assert kw["reduction_config"].save_raw_tensor is False
    kw = hook_kwargs_from_config({"HookParameters": {"reductions": "max", "save_raw_tensor": True}}, builtin=BUILTIN_REGEXES, env={})
    assert kw["reduction_config"].save_raw_tensor is True
    assert kw["out_dir"] == "/opt/ml/output/tensors"
    assert kw["include_collections"] == []


def test_every_problem_is_reported_with_its_key() -> None:
    config = {
        "HookParameters": {"save_inteval": "10", "train.reductions": "mean", "save_interval": "-1",
                           "save_shape": "yes"},
        "CollectionConfigurations": [
            {"CollectionName": "bad", "CollectionParameters": {"include_regex": "(oops"}},
            {"CollectionParameters": {}},
        ],
    }
    with pytest.raises(ConfigError) as err:
        hook_kwargs_from_config(config, builtin=BUILTIN_REGEXES, env={})
    text = str(err.value)
    for fragment in ("save_interval must be a positive integer",
                     "save_shape must be true or false", "'(oops' is not a valid Python regex",
                     "CollectionConfigurations[1] has no CollectionName"):
        assert fragment in text, fragment


def test_a_collection_named_twice_gets_both_parameter_sets_in_order() -> None:
    config = {"CollectionConfigurations": [
        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}},  # from a rule
        {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "10", "reductions": "mean"}},
    ]}
    kw = hook_kwargs_from_config(config, builtin=BUILTIN_REGEXES, env={})
    (coll,) = kw["collections"]
    assert coll.save_config.get_save_config(ModeKeys.TRAIN).save_interval == 10
    assert coll.reduction_config.reductions == ("mean",)
    assert coll.include_regex == ["^gradient"]  # the built-in regex is kept


def test_a_custom_collection_without_regex_is_created_empty_to_fill_in_the_script(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"LocalPath": str(tmp_path / "o"), "CollectionConfigurations": [{"CollectionName": "activations"}]})
    hook = Hook.create_from_json_file(path)
    assert "activations" in hook.include_collections and hook.get_collection("activations").include_regex == []
    hook.close()


def test_missing_file_and_env_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        Hook.create_from_json_file(tmp_path / "nope.json")
    path = write_config(tmp_path, {"LocalPath": str(tmp_path / "env-out")})
    assert Hook.create_from_json_file(path=path).out_dir == str(tmp_path / "env-out")  # DESIGN's spelling
    monkeypatch.setenv("SMDEBUG_CONFIG_FILE_PATH", str(path))
    assert Hook.create_from_json_file().out_dir == str(tmp_path / "env-out")


def test_tensorboard_inside_sagemaker_follows_its_config_file(tmp_path: Path) -> None:
    tb_file = tmp_path / "tensorboardoutputconfig.json"
    config = {"HookParameters": {"export_tensorboard": "true", "tensorboard_dir": "/ignored"}}
    env = {"TRAINING_JOB_NAME": "job", "TENSORBOARD_CONFIG_FILE_PATH": str(tb_file)}
    kw = hook_kwargs_from_config(config, builtin=BUILTIN_REGEXES, env=env)
    assert "export_tensorboard" not in kw and "tensorboard_dir" not in kw
    tb_file.write_text(json.dumps({"LocalPath": "/opt/ml/output/tb", "S3OutputPath": "s3://b/tb"}))
    kw = hook_kwargs_from_config(config, builtin=BUILTIN_REGEXES, env=env)
    assert kw["export_tensorboard"] is True and kw["tensorboard_dir"] == "/opt/ml/output/tb"
    kw = hook_kwargs_from_config(config, builtin=BUILTIN_REGEXES, env={})
    assert kw["export_tensorboard"] is True and kw["tensorboard_dir"] == "/ignored"


def test_save_all_and_include_workers(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"LocalPath": str(tmp_path / "o"),
                                   "HookParameters": {"save_all": "true", "include_workers": "all", "save_interval": "1"}})
    hook = Hook.create_from_json_file(path)
    assert hook.include_workers == "all" and hook.save_all
    with hook.step():
        hook.save_tensor("anything/at_all", np.ones(1), collections_to_write=())
    hook.close()
    assert "anything/at_all" in dump_with_format(tmp_path / "o")["tensors"]
