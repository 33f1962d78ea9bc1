"""sdk_ext: SageMaker Debugger, rebuilt.

Subpackages: ``debugger`` (job configuration), ``hooks``/``pytorch`` (saving tensors in training),
``trials`` (reading them back), ``rules`` (judging them), ``local`` (the whole loop on one machine).
Importing this package runs nothing else.
"""

import logging
from typing import Any

from sdk_ext.modes import ModeKeys

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

# smdebug's top-level names (``from smdebug import SaveConfig, modes``), imported on first use so that
# ``import sdk_ext`` stays light.
_LAZY = {
    "CollectionKeys": "sdk_ext.hooks.collections",
    "ReductionConfig": "sdk_ext.hooks.reduction_config",
    "SaveConfig": "sdk_ext.hooks.save_config",
    "SaveConfigMode": "sdk_ext.hooks.save_config",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sdk_ext' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["CollectionKeys", "ModeKeys", "ReductionConfig", "SaveConfig", "SaveConfigMode", "__version__"]
