"""``smdebug.core.json_config``: reading SageMaker's ``debughookconfig.json`` (see :mod:`sdk_ext.hooks.json_config`)."""

from sdk_ext.core.config_constants import (
    CONFIG_FILE_PATH_ENV_STR,
    DEFAULT_CONFIG_FILE_PATH,
    DEFAULT_RESOURCE_CONFIG_FILE,
    DEFAULT_SAGEMAKER_OUTDIR,
    DEFAULT_SAGEMAKER_TENSORBOARD_PATH,
    TENSORBOARD_CONFIG_FILE_PATH_ENV_STR,
)
from sdk_ext.hooks.json_config import (
    add_collections_to_manager,
    collect_hook_config_params,
    get_include_collections,
    get_json_config_as_dict,
)

__all__ = [
    "CONFIG_FILE_PATH_ENV_STR",
    "DEFAULT_CONFIG_FILE_PATH",
    "DEFAULT_RESOURCE_CONFIG_FILE",
    "DEFAULT_SAGEMAKER_OUTDIR",
    "DEFAULT_SAGEMAKER_TENSORBOARD_PATH",
    "TENSORBOARD_CONFIG_FILE_PATH_ENV_STR",
    "add_collections_to_manager",
    "collect_hook_config_params",
    "get_include_collections",
    "get_json_config_as_dict",
]
