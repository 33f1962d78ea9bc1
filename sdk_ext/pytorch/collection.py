"""``smdebug.pytorch.collection``: the collection classes of the PyTorch hook."""

from sdk_ext.hooks.collections import Collection, CollectionKeys, CollectionManager

__all__ = ["Collection", "CollectionKeys", "CollectionManager"]
