"""``smdebug.core.modes``: the training modes."""

from sdk_ext.modes import ALL_MODES, ModeKeys

#: The four modes (a list, as smdebug exposes it).
ALLOWED_MODES: list[ModeKeys] = list(ALL_MODES)
ALLOWED_MODE_NAMES: list[str] = [m.name for m in ALL_MODES]
#: Event-record plugin names under which a tensor's mode and mode step are stored.
MODE_STEP_PLUGIN_NAME = "mode_step"
MODE_PLUGIN_NAME = "mode"


def str_to_mode_keys(mode_str: str) -> ModeKeys:
    """``"train"`` -> ``ModeKeys.TRAIN`` (any case). Raises ValueError naming the valid modes."""
    return ModeKeys.parse(mode_str)


__all__ = ["ALLOWED_MODES", "ALLOWED_MODE_NAMES", "MODE_PLUGIN_NAME", "MODE_STEP_PLUGIN_NAME", "ModeKeys",
           "str_to_mode_keys"]
