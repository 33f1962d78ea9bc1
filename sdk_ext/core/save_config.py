"""``smdebug.core.save_config``: ``SaveConfig``, ``SaveConfigMode`` and their defaults."""

from sdk_ext.hooks.save_config import DEFAULT_SAVE_INTERVAL, SaveConfig, SaveConfigMode

DEFAULT_SAVE_CONFIG_INTERVAL = DEFAULT_SAVE_INTERVAL
DEFAULT_SAVE_CONFIG_START_STEP = 0
DEFAULT_SAVE_CONFIG_END_STEP = None
DEFAULT_SAVE_CONFIG_SAVE_STEPS: list[int] = []

__all__ = [
    "DEFAULT_SAVE_CONFIG_END_STEP",
    "DEFAULT_SAVE_CONFIG_INTERVAL",
    "DEFAULT_SAVE_CONFIG_SAVE_STEPS",
    "DEFAULT_SAVE_CONFIG_START_STEP",
    "SaveConfig",
    "SaveConfigMode",
]
