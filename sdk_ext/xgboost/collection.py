"""smdebug's module path ``smdebug.xgboost.collection``."""

from sdk_ext.hooks.collections import Collection, CollectionKeys, CollectionManager

__all__ = ["Collection", "CollectionKeys", "CollectionManager"]
