import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import SaveConfig, SaveConfigMode
from sdk_ext.modes import ModeKeys


def test_default_saves_every_500_steps_from_zero() -> None:
    c = SaveConfigMode()
    assert [s for s in range(2001) if c.should_save_step(s)] == [0, 500, 1000, 1500, 2000]


def test_interval_counts_from_zero_not_from_start_step_and_end_is_exclusive() -> None:
    c = SaveConfigMode(save_interval=10, start_step=5, end_step=40)
    assert [s for s in range(60) if c.should_save_step(s)] == [10, 20, 30]


def test_save_steps_add_to_the_interval_schedule() -> None:
    c = SaveConfigMode(save_interval=100, save_steps=[3, 7], end_step=150)
    assert [s for s in range(300) if c.should_save_step(s)] == [0, 3, 7, 100]


def test_strings_from_sagemaker_are_parsed() -> None:
    c = SaveConfigMode(save_interval="2", start_step="1", end_step="9", save_steps="1,5")
    assert (c.save_interval, c.start_step, c.end_step, c.save_steps) == (2, 1, 9, (1, 5))


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"save_interval": 0}, "save_interval must be a positive integer"),
        ({"save_interval": -5}, "save_interval must be a positive integer"),
        ({"start_step": -1}, "start_step must be >= 0"),
        ({"start_step": 10, "end_step": 3}, "end_step (3) is before start_step (10)"),
        ({"save_interval": "ten"}, "save_interval must be an integer"),
        ({"save_steps": "1,x"}, "save_steps item must be an integer"),
        ({"save_steps": [-2]}, "save_steps item must be >= 0"),
    ],
)
def test_bad_values_raise_config_error_naming_the_problem(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        SaveConfigMode(**kwargs)  # type: ignore[arg-type]
    assert fragment in str(err.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        SaveConfigMode(save_interval=0, start_step=-1)
    assert len(err.value.problems) == 2


def test_mode_less_config_applies_to_every_mode() -> None:
    c = SaveConfig(save_interval=3)
    for mode in ModeKeys:
        assert c.should_save_step(mode, 3) and not c.should_save_step(mode, 4)


def test_partial_mode_config_uses_defaults_for_the_hook_and_hook_config_for_a_collection() -> None:
    partial = SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=2)})
    # smdebug raised "SaveConfig is not ready" when PREDICT was used; here it falls back
    assert partial.complete().get_save_config(ModeKeys.PREDICT) == SaveConfigMode()
    hook_level = SaveConfig(save_interval=7)
    merged = partial.merged_with(hook_level)
    assert merged.get_save_config(ModeKeys.TRAIN).save_interval == 2
    assert merged.get_save_config(ModeKeys.EVAL).save_interval == 7


def test_parse_accepts_what_smdebug_hooks_accept() -> None:
    assert SaveConfig.parse(None) == SaveConfig()
    assert SaveConfig.parse(5) == SaveConfig(save_interval=5)
    mode = SaveConfigMode(save_interval=4)
    assert SaveConfig.parse(mode).get_save_config(ModeKeys.EVAL) == mode
    assert SaveConfig.parse({"TRAIN": {"save_interval": "3"}}).get_save_config(ModeKeys.TRAIN).save_interval == 3
    with pytest.raises(ConfigError):
        SaveConfig.parse("often")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown mode"):
        SaveConfig({"TRAINING": SaveConfigMode()})


def test_to_json_dict_matches_the_collections_file_form() -> None:
    assert SaveConfig(save_interval=2, save_steps=[1]).to_json_dict()["EVAL"] == {
        "save_interval": 2, "save_steps": [1], "start_step": 0, "end_step": None,
    }


@pytest.mark.parametrize("kwargs", [
    {}, {"save_interval": 7, "start_step": 10, "end_step": 50}, {"save_interval": 100, "save_steps": [3, 250]},
    {"save_interval": 1, "end_step": 5}, {"save_interval": 4, "start_step": 9},
])
def test_next_step_after_agrees_with_should_save_step(kwargs: dict[str, object]) -> None:
    c = SaveConfigMode(**kwargs)  # type: ignore[arg-type]
    saved = [s for s in range(1200) if c.should_save_step(s)]
    for step in range(0, 1100, 13):
        later = [s for s in saved if s > step]
        nxt = c.next_step_after(step)
        if later:
            assert nxt == later[0]
        else:
            assert nxt is None or nxt >= 1200


def test_to_json_and_from_json_round_trip_as_in_smdebug() -> None:
    config = SaveConfig(save_interval=11, start_step=10, save_steps=[50])
    assert SaveConfig.from_json(config.to_json()) == config
    assert SaveConfig.from_json(config.to_json()).to_json() == config.to_json()
    per_mode = SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=2), ModeKeys.EVAL: SaveConfigMode(end_step=3)})
    assert SaveConfig.from_json(per_mode.to_json()) == per_mode
    with pytest.raises(ConfigError, match="save config JSON"):
        SaveConfig.from_json("[1, 2]")
