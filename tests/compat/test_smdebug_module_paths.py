"""smdebug's module paths port by prefix: ``smdebug.core.*``, ``smdebug.analysis.utils``, and the
names ``smdebug``, ``smdebug.pytorch`` and ``smdebug.tensorflow`` export; with the behaviour behind them
(collections to/from JSON and files, ``set_mode`` refusing an unknown mode, ``get_hook``/``set_hook``).

Collections files are exchanged with real smdebug 1.0.34 both ways: what ``CollectionManager.export``
writes, smdebug's ``CollectionManager.load`` reads as the same collections, and the reverse.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

import sdk_ext.pytorch as smd
from sdk_ext.exceptions import SMDebugValueError
from sdk_ext.hooks import Hook
from sdk_ext.trials import create_trial
from tests.moto_s3 import S3Env

# module path -> public names imported from it by smdebug's docs, examples, notebooks or tests
PATHS = {
    "core.modes": ["ModeKeys", "ALLOWED_MODES", "ALLOWED_MODE_NAMES", "MODE_STEP_PLUGIN_NAME", "MODE_PLUGIN_NAME"],
    "core.collection": ["Collection", "CollectionKeys", "SCALAR_COLLECTIONS", "NON_REDUCTION_COLLECTIONS",
                        "SM_METRIC_COLLECTIONS"],
    "core.collection_manager": ["CollectionManager"],
    "core.reduction_config": ["ReductionConfig", "ALLOWED_REDUCTIONS", "ALLOWED_NORMS"],
    "core.save_config": ["SaveConfig", "SaveConfigMode", "DEFAULT_SAVE_CONFIG_INTERVAL"],
    "core.config_constants": ["DEFAULT_COLLECTIONS_FILE_NAME", "CONFIG_FILE_PATH_ENV_STR", "DEFAULT_SAGEMAKER_OUTDIR",
                              "DEFAULT_WORKER_NAME", "INCOMPLETE_STEP_WAIT_WINDOW_KEY",
                              "MISSING_EVENT_FILE_RETRY_LIMIT_KEY", "TRAINING_END_DELAY_REFRESH_KEY",
                              "TENSORBOARD_CONFIG_FILE_PATH_ENV_STR", "DEFAULT_SAGEMAKER_TENSORBOARD_PATH"],
    "core.json_config": ["CONFIG_FILE_PATH_ENV_STR", "DEFAULT_SAGEMAKER_OUTDIR", "DEFAULT_RESOURCE_CONFIG_FILE",
                         "get_json_config_as_dict", "collect_hook_config_params", "get_include_collections",
                         "add_collections_to_manager"],
    "core.utils": ["is_s3", "get_path_to_collections", "make_numpy_array", "ensure_dir", "remove_file_if_exists"],
    "core.tensor": ["Tensor", "StepState"],
    "core.access_layer": ["has_training_ended", "training_has_ended"],
    "core.access_layer.utils": ["has_training_ended", "training_has_ended"],
    "analysis.utils": ["no_refresh", "refresh", "parse_bool", "parse_list_from_str"],
    "pytorch": ["Hook", "Collection", "CollectionKeys", "SaveConfig", "SaveConfigMode", "ReductionConfig", "modes",
                "create_trial", "get_hook", "set_hook", "del_hook"],
    "pytorch.collection": ["Collection", "CollectionKeys"],
    "pytorch.singleton_utils": ["get_hook", "set_hook", "del_hook"],
    "tensorflow": ["KerasHook", "Collection", "CollectionKeys", "SaveConfig", "SaveConfigMode", "ReductionConfig",
                   "modes", "create_trial", "get_hook", "set_hook", "del_hook"],
    "": ["SaveConfig", "SaveConfigMode", "ReductionConfig", "CollectionKeys", "modes"],
    "exceptions": ["SMDebugError", "SMDebugTypeError", "SMDebugValueError", "SMDebugRuntimeError",
                   "TensorUnavailableForStep", "StepUnavailable", "NoMoreData"],
}


@pytest.fixture(autouse=True)
def _no_process_hook() -> None:
    smd.del_hook()


@pytest.mark.parametrize("path", sorted(PATHS))
def test_smdebug_module_path_imports_with_the_prefix_changed(path: str) -> None:
    module = importlib.import_module("sdk_ext" + (f".{path}" if path else ""))
    missing = [n for n in PATHS[path] if not hasattr(module, n)]
    assert not missing, f"sdk_ext.{path} lacks {missing}"


def test_core_names_are_the_package_objects_so_isinstance_holds() -> None:
    from sdk_ext.core.collection import Collection, CollectionKeys
    from sdk_ext.core.modes import ModeKeys
    from sdk_ext.core.save_config import SaveConfig

    hook = Hook("/nonexistent-not-written", dry_run=True, save_config=SaveConfig(save_interval=3))
    assert isinstance(hook.get_collection(CollectionKeys.WEIGHTS), Collection)
    assert hook.mode is ModeKeys.GLOBAL and smd.modes.TRAIN is ModeKeys.TRAIN
    assert smd.create_trial is create_trial


def test_collection_round_trips_through_json_with_partial_save_config() -> None:
    from sdk_ext.core.collection import Collection
    from sdk_ext.core.modes import ModeKeys
    from sdk_ext.core.reduction_config import ReductionConfig
    from sdk_ext.core.save_config import SaveConfig, SaveConfigMode

    c1 = Collection("default", include_regex=["conv2d"], tensor_names=["a", "b"],
                    reduction_config=ReductionConfig(norms=["l2"]),
                    save_config=SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=10)}))
    doc = c1.to_json_dict()
    assert doc["save_config"]["EVAL"] is None  # a mode left to the hook stays unset, as smdebug writes it
    assert doc["reduction_config"] == {"save_raw_tensor": False, "reductions": "l2_norm", "save_shape": False}
    c2 = Collection.from_json(c1.to_json())
    assert c1 == c2 and c2.tensor_names == {"a", "b"} and isinstance(c2.tensor_names, set)
    assert Collection("x") != Collection("x", include_regex="y")


def test_collection_lists_change_in_place_as_in_smdebug_and_a_bad_regex_is_refused() -> None:
    from sdk_ext.core.collection import Collection

    c = Collection("custom")
    c.include_regex.append("^fc")
    c.tensor_names.add("loss")
    assert c.matches("fc1.weight") and c.matches("loss") and c.include_regex == ["^fc"]
    c.tensor_names = ["a", "b"]  # smdebug's test helpers assign lists
    assert c.tensor_names == {"a", "b"}
    with pytest.raises(ValueError, match=r"not a valid Python regex"):
        c.include_regex.append("(")
    assert c.include_regex == ["^fc"]  # the refused change is undone


SMDEBUG_COLLECTIONS = textwrap.dedent("""
    import json, sys
    from smdebug.core.collection import Collection
    from smdebug.core.collection_manager import CollectionManager
    from smdebug.core.modes import ModeKeys
    from smdebug.core.save_config import SaveConfig, SaveConfigMode
    mine = sys.argv[1]
    loaded = CollectionManager.load(mine + "/collections/000000000/worker_0_collections.json")
    cm = CollectionManager()
    cm.create_collection("default")
    cm.get("default").include("loss")
    cm.add(Collection("custom", tensor_names=["t1"], save_config=SaveConfig({ModeKeys.EVAL: SaveConfigMode(save_interval=2)})))
    cm.export(sys.argv[2], "worker_0_collections.json")
    print(json.dumps(loaded.to_json_dict()))
""")


@pytest.mark.smdebug
def test_collection_files_are_exchanged_with_real_smdebug(tmp_path: Path, smdebug_python: Path) -> None:
    from sdk_ext.core.collection import Collection
    from sdk_ext.core.collection_manager import CollectionManager
    from sdk_ext.core.config_constants import DEFAULT_COLLECTIONS_FILE_NAME
    from sdk_ext.core.modes import ModeKeys
    from sdk_ext.core.save_config import SaveConfig, SaveConfigMode
    from sdk_ext.core.utils import get_path_to_collections

    ours = CollectionManager()
    ours.create_collection("default")
    ours.get("default").include("loss")
    ours.add("trial2")
    ours.add(Collection("custom", tensor_names=["t1"],
                        save_config=SaveConfig({ModeKeys.EVAL: SaveConfigMode(save_interval=2)})))
    ours.export(str(tmp_path / "mine"), DEFAULT_COLLECTIONS_FILE_NAME)
    script = tmp_path / "smd.py"
    script.write_text(SMDEBUG_COLLECTIONS)
    proc = subprocess.run([str(smdebug_python), str(script), str(tmp_path / "mine"), str(tmp_path / "theirs")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ours.to_json_dict()  # smdebug read ours as is
    theirs = CollectionManager.load(Path(get_path_to_collections(str(tmp_path / "theirs")), DEFAULT_COLLECTIONS_FILE_NAME))
    expected = CollectionManager()
    expected.create_collection("default")
    expected.get("default").include("loss")
    expected.add(Collection("custom", tensor_names=["t1"],
                            save_config=SaveConfig({ModeKeys.EVAL: SaveConfigMode(save_interval=2)})))
    assert theirs == expected


def test_a_trial_reads_collections_exported_by_hand(tmp_path: Path) -> None:
    """smdebug's test helpers write trials by hand: events from a writer, collections from CollectionManager.export."""
    from sdk_ext.core.collection_manager import CollectionManager

    hook = Hook(str(tmp_path / "t"), save_config=1)
    hook.save_tensor("w_0", np.ones(3), collections_to_write="weights")
    hook.close()
    cm = CollectionManager()
    cm.add("gradients")
    cm.get("gradients").tensor_names = ["w_0"]
    cm.export(str(tmp_path / "t"), "worker_0_collections.json")  # replaces the hook's file
    trial = create_trial(str(tmp_path / "t"))
    assert trial.tensor_names(collection="gradients") == ["w_0"]


def test_set_mode_with_an_unknown_mode_raises_value_error(tmp_path: Path) -> None:
    hook = smd.Hook(tmp_path / "trial")
    with pytest.raises(ValueError, match="unknown mode 'a'") as raised:
        hook.set_mode("a")
    assert isinstance(raised.value, SMDebugValueError)
    hook.set_mode(smd.modes.EVAL)
    assert not hook.disabled and hook.mode is smd.modes.EVAL
    hook.close()


def test_get_hook_set_hook_and_del_hook_share_the_process_hook(tmp_path: Path) -> None:
    hook = smd.Hook(tmp_path / "trial")
    smd.del_hook()
    assert smd.get_hook() is None
    smd.set_hook(hook)
    assert smd.get_hook() is hook
    with pytest.raises(TypeError, match="set_hook takes an sdk_ext hook"):
        smd.set_hook(object())
    hook.close()


def test_tensorflow_get_hook_takes_smdebugs_hook_type_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sdk_ext.tensorflow as tf_smd
    from sdk_ext.core.json_config import CONFIG_FILE_PATH_ENV_STR

    config = tmp_path / "debughookconfig.json"
    config.write_text(json.dumps({"LocalPath": str(tmp_path / "out"), "HookParameters": {"save_interval": "2"}}))
    monkeypatch.setenv(CONFIG_FILE_PATH_ENV_STR, str(config))
    assert tf_smd.get_hook("keras") is None  # none exists yet, and it was not asked to create one
    hook = tf_smd.get_hook("keras", create_if_not_exists=True)
    assert isinstance(hook, tf_smd.KerasHook) and hook.out_dir == str(tmp_path / "out")
    assert tf_smd.get_hook("keras") is hook and tf_smd.get_hook() is hook
    assert tf_smd.get_hook("session", create_if_not_exists=True) is None  # TF1 hooks: logged, not created
    hook.close()


def test_json_config_staged_api_reads_what_sagemaker_writes(tmp_path: Path) -> None:
    from sdk_ext.core.collection_manager import CollectionManager
    from sdk_ext.core.json_config import (
        add_collections_to_manager,
        collect_hook_config_params,
        get_include_collections,
        get_json_config_as_dict,
    )

    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({
        "LocalPath": "/tmp/x", "HookParameters": {"save_interval": "2", "save_all": "true"},
        "CollectionConfigurations": [{"CollectionName": "weights", "CollectionParameters": {"save_histogram": "false"}},
                                     {"CollectionName": "gradients", "CollectionParameters": {"eval.save_interval": "5"}}],
    }))
    doc = get_json_config_as_dict(str(path))
    params = collect_hook_config_params(doc)
    assert params["save_all"] is True and params["out_dir"] == "/tmp/x"
    assert get_include_collections(doc) == ["weights", "gradients"]
    manager = CollectionManager()
    add_collections_to_manager(manager, doc, params)
    assert manager.get("weights").save_histogram is False
    from sdk_ext.core.modes import ModeKeys

    gradients = manager.get("gradients").save_config
    assert gradients is not None and gradients.get_save_config(ModeKeys.EVAL).save_interval == 5
    assert gradients.get_save_config(ModeKeys.TRAIN).save_interval == 2
    with pytest.raises(FileNotFoundError):
        get_json_config_as_dict(str(tmp_path / "missing.json"))


def test_training_end_marker_helpers_work_on_s3(s3: S3Env) -> None:
    from sdk_ext.core.access_layer import has_training_ended, training_has_ended

    trial = s3.uri("job/debug-output")
    assert has_training_ended(trial) is False
    training_has_ended(trial)
    assert has_training_ended(trial) is True
    assert "job/debug-output/training_job_end.ts" in s3.keys("job/")


def test_analysis_utils_refresh_and_no_refresh_toggle_and_restore(tmp_path: Path) -> None:
    from sdk_ext.analysis.utils import no_refresh, parse_bool, refresh

    hook = Hook(str(tmp_path / "t"), save_config=1)
    hook.save_tensor("x", np.ones(1))
    hook.close()
    trial = create_trial(str(tmp_path / "t"))
    with no_refresh([trial]) as [t]:
        assert t.dynamic_refresh is False
        with refresh(t):
            assert t.dynamic_refresh is True
        assert t.dynamic_refresh is False
    assert trial.dynamic_refresh is True
    assert parse_bool("false", True) is False and parse_bool(None, True) is True
    with pytest.raises(ValueError, match="boolean argument expected"):
        parse_bool("yes", True)
