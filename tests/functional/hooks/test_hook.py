import json
import logging
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError, StorageError
from sdk_ext.format import event_pb2
from sdk_ext.format.records import iter_records
from sdk_ext.hooks import Collection, Hook, ReductionConfig, SaveConfig, SaveConfigMode
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import create_trial
from tests.trial_dump import decode_value_json, dump_with_format


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_steps_modes_and_intervals(tmp_path: Path) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=2),
                                                  ModeKeys.EVAL: SaveConfigMode(save_interval=1)}))
    hook.set_mode(ModeKeys.TRAIN)
    for i in range(4):  # global 0-3, TRAIN 0-3
        with hook.step() as g:
            assert g == i
            hook.save_tensor("loss", np.float32(i), collections_to_write="losses")
    hook.set_mode("eval")
    for i in range(2):  # global 4-5, EVAL 0-1
        with hook.step():
            assert hook.mode_step == i
            hook.save_tensor("loss", np.float32(10 + i), collections_to_write="losses")
    hook.set_mode(ModeKeys.TRAIN)
    with hook.step():  # global 6, TRAIN 4
        hook.save_tensor("loss", np.float32(4), collections_to_write="losses")
    hook.close()
    dump = dump_with_format(tmp_path)
    assert dump["steps"] == {"GLOBAL": [0, 2, 4, 5, 6], "TRAIN": [0, 2, 4], "EVAL": [0, 1]}
    assert dump["mode_of_step"] == {"0": ["TRAIN", 0], "2": ["TRAIN", 2], "4": ["EVAL", 0], "5": ["EVAL", 1],
                                    "6": ["TRAIN", 4]}
    assert decode_value_json(dump["tensors"]["loss"]["5"]["worker_0"]["value"])[0] == 11
    assert (tmp_path / "training_job_end.ts").read_bytes() == b""


def test_without_set_mode_steps_are_global_and_mode_step_is_the_global_step(tmp_path: Path) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=3))
    for i in range(7):
        hook.begin_step()
        hook.save_tensor("x", np.array([i]))
        hook.end_step()
    hook.close()
    dump = dump_with_format(tmp_path)
    assert dump["steps"] == {"GLOBAL": [0, 3, 6]}
    assert dump["mode_of_step"]["6"] == ["GLOBAL", 6]


def test_scalars_are_written_at_the_step_given_and_tensors_follow_the_save_config(tmp_path: Path) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=2))
    for i in range(3):
        with hook.step():
            hook.save_scalar("lr", 0.1 * i)
            hook.save_tensor("marker", np.array([i]))
    hook.close()
    dump = dump_with_format(tmp_path)
    assert sorted(dump["tensors"]["scalar/lr"]) == ["0", "1", "2"]  # step 1 saves nothing else
    assert decode_value_json(dump["tensors"]["scalar/lr"]["1"]["worker_0"]["value"]).tolist() == [0.1]
    assert sorted(dump["tensors"]["marker"]) == ["0", "2"]
    index = json.loads((tmp_path / "index/000000000/000000000002_worker_0.json").read_text())
    assert [e["tensorname"] for e in index["tensor_payload"]] == ["scalar/lr", "marker"]  # one each, no backlog


def test_saving_outside_a_step_opens_the_next_step(tmp_path: Path) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    hook.save_tensor("a", np.ones(2))
    hook.begin_step()
    hook.save_tensor("a", np.ones(2))
    hook.close()
    assert dump_with_format(tmp_path)["steps"]["GLOBAL"] == [0, 1]


def test_reductions_only_and_shape_entries(tmp_path: Path) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_collections=["weights"],
                reduction_config=ReductionConfig(reductions=["max"], abs_norms=["l1"], save_shape=True))
    with hook.step():
        hook.save_tensor("fc.weight", np.array([[1.0, -3.0]]), collections_to_write=())
    hook.close()
    rec = dump_with_format(tmp_path)["tensors"]["fc.weight"]["0"]["worker_0"]
    assert rec["value"] == {"error": "TensorUnavailableForStep"}
    assert decode_value_json(rec["reductions"]["max"]).tolist() == [1.0]
    assert decode_value_json(rec["reductions"]["abs_l1"]).tolist() == [4.0]
    index = json.loads((tmp_path / "index/000000000/000000000000_worker_0.json").read_text())
    assert index["shape_payload"] == [{"tensorname": "fc.weight", "originalname": "fc.weight", "shape": [1, 2]}]


def test_configuration_errors_are_raised_at_construction_all_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        Hook(tmp_path, include_regex=["(bad"], save_config=SaveConfig.parse({"TRAIN": {"save_interval": 1}}),
             include_workers="some")
    assert "include_workers" in str(err.value) and "(bad" in str(err.value)
    with pytest.raises(ConfigError, match="save_interval must be a positive integer"):
        Hook(tmp_path, save_config={"TRAIN": {"save_interval": -1}})
    with pytest.raises(ConfigError, match="include_collections items must be strings"):
        Hook(tmp_path, include_collections=[3])
    with pytest.raises(ConfigError, match="not a valid Python regex"):
        Hook(tmp_path, collections=[Collection("custom", include_regex="[")])
    assert files(tmp_path) == []  # nothing touched the disk


def test_a_finished_trial_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "training_job_end.ts").write_bytes(b"")
    with pytest.raises(ConfigError, match="already holds a finished trial"):
        Hook(tmp_path)


class BreakingStorage(LocalStorage):
    """Fails every write of global step 2 and later (the disk filled up)."""

    def open_write(self, key: str):  # type: ignore[no-untyped-def]
        if key.startswith("events/") and int(key.split("/")[1]) >= 2:
            raise StorageError(f"{key}: no space left on device")
        return super().open_write(key)


def test_a_failure_is_logged_once_disables_the_hook_and_training_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hook = Hook(BreakingStorage(tmp_path), save_config=SaveConfig(save_interval=1))
    caplog.set_level(logging.ERROR, logger="sdk_ext")
    for i in range(5):  # steps 0 and 1 succeed; step 2 fails
        with hook.step():
            hook.save_tensor("x", np.array([i]))
            hook.save_scalar("s", i)
    hook.close()
    assert hook.disabled and isinstance(hook.failure, StorageError)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert "disabled" in errors[0].getMessage()
    assert dump_with_format(tmp_path)["steps"]["GLOBAL"] == [0, 1]  # completed steps are intact


def test_user_errors_at_run_time_do_not_raise(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    with hook.step():
        hook.save_tensor("when", np.array(["2024-01-01"], dtype="datetime64[D]"))  # no such dtype in the format
        hook.save_tensor("ok", np.ones(1))
    assert not hook.disabled and "when" in caplog.text
    hook.close()
    assert "ok" in dump_with_format(tmp_path)["tensors"]


def test_set_mode_with_an_unknown_mode_raises_value_error_and_the_hook_keeps_saving(tmp_path: Path) -> None:
    """As smdebug's set_mode does (its tests/xgboost expects ValueError): a typo in the call is the caller's
    mistake, reported where it is made; the hook is not disabled by it."""
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    with pytest.raises(ValueError, match="TRAINING"):
        hook.set_mode("TRAINING")
    assert not hook.disabled
    hook.set_mode(ModeKeys.EVAL)
    hook.save_tensor("x", np.ones(1))
    hook.close()
    assert create_trial(str(tmp_path)).steps(mode=ModeKeys.EVAL) == [0]


def test_no_end_marker_inside_sagemaker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINING_JOB_NAME", "job-1")
    hook = Hook(tmp_path)
    hook.save_tensor("x", np.ones(1))
    hook.close()
    assert "training_job_end.ts" not in files(tmp_path)
    assert "collections/000000000/worker_0_collections.json" in files(tmp_path)


def test_include_workers_one_writes_only_rank_0(tmp_path: Path) -> None:
    for rank in (0, 1):
        hook = Hook(tmp_path / f"r{rank}", rank=rank, world_size=2, save_config=SaveConfig(save_interval=1))
        hook.save_tensor("x", np.ones(1))
        hook.close()
    assert files(tmp_path / "r1") == []
    meta = json.loads((tmp_path / "r0/collections/000000000/worker_0_collections.json").read_text())["_meta"]
    assert meta == {"num_workers": 1}


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    hook = Hook(tmp_path, dry_run=True, save_config=SaveConfig(save_interval=1))
    with hook.step():
        hook.save_tensor("x", np.ones(3))
    hook.close()
    assert files(tmp_path) == []


def test_collections_file_follows_new_members(tmp_path: Path) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1))
    with hook.step():
        hook.save_tensor("a", np.ones(1))
    with hook.step():
        hook.save_tensor("b", np.ones(1))
    hook.close()
    doc = json.loads((tmp_path / "collections/000000000/worker_0_collections.json").read_text())
    assert doc["collections"]["default"]["tensor_names"] == ["a", "b"]
    assert list(doc["collections"]) == ["all", "default", "weights", "biases", "gradients", "losses"]


def test_tensorboard_export_writes_scalars_and_histograms(tmp_path: Path) -> None:
    hook = Hook(tmp_path / "trial", export_tensorboard=True, save_config=SaveConfig(save_interval=1),
                include_collections=["weights"])
    hook.set_mode(ModeKeys.TRAIN)
    for i in range(2):
        with hook.step():
            hook.save_tensor("fc.weight", np.linspace(-1, 1, 50), collections_to_write=())
            hook.save_tensor("MSELoss_output_0", np.float32(1.5 - i), collections_to_write="losses")
            hook.save_scalar("lr", 0.5)
    hook.close()
    tb = sorted((tmp_path / "trial/tensorboard/TRAIN").iterdir())
    assert len(tb) == 1 and tb[0].name.startswith("000000000000_")
    seen = {}
    for payload in iter_records(tb[0].read_bytes()):  # real CRCs are checked
        event = event_pb2.Event.FromString(bytes(payload))
        for v in event.summary.value:
            seen[(v.tag, event.step)] = v
    assert seen[("MSELoss_output_0", 1)].simple_value == pytest.approx(0.5)
    assert seen[("scalar/lr", 0)].simple_value == pytest.approx(0.5)
    histo = seen[("weights/fc.weight", 0)].histo
    assert histo.num == 50 and sum(histo.bucket) == 50 and histo.min == -1.0
