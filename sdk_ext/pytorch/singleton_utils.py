"""``smdebug.pytorch.singleton_utils``: the process's PyTorch hook (``get_hook``, ``set_hook``, ``del_hook``)."""

from sdk_ext.hooks.zero_change import set_hook
from sdk_ext.pytorch.zero_change import del_hook, get_hook

__all__ = ["del_hook", "get_hook", "set_hook"]
