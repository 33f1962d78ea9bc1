"""smdebug's module path ``smdebug.xgboost.singleton_utils``: the process's hook."""

from sdk_ext.xgboost.zero_change import del_hook, get_hook, set_hook

__all__ = ["del_hook", "get_hook", "set_hook"]
