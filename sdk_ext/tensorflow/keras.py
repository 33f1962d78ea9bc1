"""smdebug's module path ``smdebug.tensorflow.keras``: ``from sdk_ext.tensorflow.keras import KerasHook``."""

from sdk_ext.keras.hook import KerasHook

__all__ = ["KerasHook"]
