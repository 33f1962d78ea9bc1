"""``smdebug.core.collection_manager``: ``CollectionManager``."""

from sdk_ext.hooks.collections import CollectionManager

__all__ = ["CollectionManager"]
