"""smdebug's module path ``smdebug.tensorflow.singleton_utils``: the process's hook."""

from sdk_ext.keras.zero_change import del_hook, get_hook, set_hook

__all__ = ["del_hook", "get_hook", "set_hook"]
