"""Training-container side: what to save when (pure policy) and the writer that saves it.

``Hook`` is the framework-free hook (``sdk_ext.pytorch.Hook`` builds on it). Configuration comes
from arguments or from SageMaker's ``debughookconfig.json`` (``Hook.create_from_json_file``).
"""

from sdk_ext.hooks.collections import Collection, CollectionKeys, CollectionManager
from sdk_ext.hooks.hook import Hook
from sdk_ext.hooks.policy import SavePolicy, TensorPlan
from sdk_ext.hooks.reduction_config import ReductionConfig
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode
from sdk_ext.hooks.writer import TrialWriter
from sdk_ext.modes import ModeKeys

__all__ = [
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "Hook",
    "ModeKeys",
    "ReductionConfig",
    "SaveConfig",
    "SaveConfigMode",
    "SavePolicy",
    "TensorPlan",
    "TrialWriter",
]
