"""smdebug's ``smdebug.core.*`` module paths, for code that imports public names from them.

``from sdk_ext.core.modes import ModeKeys``, ``from sdk_ext.core.collection import CollectionKeys``...
work as ``from smdebug.core...`` did. The modules here re-export names whose code lives in the
packages that own it (``hooks``, ``trials``, ``format``, ``storage``); the few smdebug-shaped helpers
of ``utils``/``access_layer`` are thin functions over those packages. Importing this package imports
nothing heavy (no framework).

Modules: ``modes``, ``collection``, ``collection_manager``, ``reduction_config``, ``save_config``,
``config_constants``, ``json_config``, ``utils``, ``tensor``, ``access_layer``.
"""
