"""smdebug's module path ``smdebug.tensorflow.singleton_utils``: the process's hook."""

from sdk_ext.tensorflow import del_hook, get_hook, set_hook

__all__ = ["del_hook", "get_hook", "set_hook"]
