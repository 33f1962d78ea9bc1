"""Smaller faults, hook and reader side: an unencodable tensor name, a damaged include_regex in a
collections file, a NUL in debughookconfig.json's LocalPath."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError, DamagedDataError, SdkExtError
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.trials import create_trial

BAD = "layer\udc80/weight"  # a lone surrogate: what os.fsdecode makes of a non-UTF-8 byte in a file name


def test_one_unencodable_tensor_name_skips_that_tensor_with_one_warning(tmp_path: Path, caplog) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_regex=[".*"])
    with caplog.at_level(logging.WARNING, logger="sdk_ext"):
        for step in range(4):
            with hook.step():
                hook.save_tensor("before", np.full(3, step, np.float32))
                hook.save_tensor(BAD, np.ones(3))
                hook.save_tensor("after", np.full(2, -step, np.int64))
        hook.close()
    assert hook.failure is None  # the hook is not disabled
    warned = [r.getMessage() for r in caplog.records if "not saved" in r.getMessage()]
    assert len(warned) == 1 and "layer\\udc80/weight" in warned[0]
    trial = create_trial(str(tmp_path), timeout=0)
    assert sorted(trial.tensor_names()) == ["after", "before"]
    assert trial.steps() == [0, 1, 2, 3]
    assert [trial.tensor("after").value(s).tolist() for s in range(4)] == [[-s, -s] for s in range(4)]


def test_a_damaged_include_regex_is_an_error_naming_the_collections_file(tmp_path: Path) -> None:
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_collections=["weights"])
    with hook.step():
        hook.save_tensor("fc.weight", np.ones(3), collections_to_write="weights")
    hook.close()
    path = next((tmp_path / "collections").rglob("*_collections.json"))
    data = bytearray(path.read_bytes())
    at = data.index(b'"^(?!gradient)') + 2  # the '(' of the weights collection's regex
    data[at] ^= 0x01  # one flipped bit: '(' becomes ')'
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedDataError) as err:
        create_trial(str(tmp_path), timeout=0).tensor_names(collection="weights")
    assert not isinstance(err.value, re.error)
    assert "collections/000000000/worker_0_collections.json" in str(err.value) and "include_regex" in str(err.value)


@pytest.mark.parametrize("key", ["LocalPath", "tensorboard_dir"])
def test_a_nul_in_a_path_of_debughookconfig_is_refused_at_construction(tmp_path: Path, key: str) -> None:
    config = {"LocalPath": str(tmp_path / "out"), "HookParameters": {"save_interval": "1"}}
    if key == "LocalPath":
        config["LocalPath"] = str(tmp_path / "out\x00put")
    else:
        config["HookParameters"].update(export_tensorboard="true", tensorboard_dir=str(tmp_path / "tb\x00"))
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=rf"{key} .*NUL"):
        Hook.create_from_json_file(str(path))
    assert isinstance(ConfigError("x"), SdkExtError)
