"""Collections: named groups of tensors (by regex or by name) sharing a save and a reduction config.

A tensor belongs to a collection when its name is one of the collection's ``tensor_names`` or when
any of its ``include_regex`` patterns matches anywhere in the name (``re.search``). A collection
without its own ``save_config``/``reduction_config`` uses the hook's. The scalar collections
(``losses``, ``metrics``, ``sm_metrics``...) always save raw values and never histograms.

Collections are configured before training starts; a bad regex raises at once. The manager keeps
collections in the order they were first created, so the collections file is deterministic.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.format.collection_file import CollectionsFile, CollectionSpec
from sdk_ext.format.paths import COLLECTIONS_DIR
from sdk_ext.hooks.reduction_config import RAW_ONLY, ReductionConfig
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode
from sdk_ext.storage import open_storage


class CollectionKeys:
    """The built-in collection names (smdebug's)."""

    DEFAULT = "default"
    ALL = "all"
    INPUTS = "inputs"
    OUTPUTS = "outputs"
    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    LOSSES = "losses"
    BIASES = "biases"
    LAYERS = "layers"
    SM_METRICS = "sm_metrics"
    OPTIMIZER_VARIABLES = "optimizer_variables"
    TENSORFLOW_SUMMARIES = "tensorflow_summaries"
    METRICS = "metrics"
    HYPERPARAMETERS = "hyperparameters"
    PREDICTIONS = "predictions"
    LABELS = "labels"
    FEATURE_IMPORTANCE = "feature_importance"
    AVERAGE_SHAP = "average_shap"
    FULL_SHAP = "full_shap"
    TREES = "trees"


#: Every collection name smdebug knows: a collection of one of these names may be empty (e.g. ``metrics``
#: in a PyTorch job, filled by ``save_tensor``); any other name needs a regex or tensor names.
KNOWN_NAMES = frozenset(v for k, v in vars(CollectionKeys).items() if k.isupper())

#: Collections of scalars: raw values only, no histograms; exported to TensorBoard as scalars.
SCALAR_COLLECTIONS = frozenset(
    {
        CollectionKeys.LOSSES,
        CollectionKeys.METRICS,
        CollectionKeys.FEATURE_IMPORTANCE,
        CollectionKeys.AVERAGE_SHAP,
        CollectionKeys.SM_METRICS,
    }
)
NON_REDUCTION_COLLECTIONS = SCALAR_COLLECTIONS | {CollectionKeys.TENSORFLOW_SUMMARIES}
#: Never saved in EVAL or PREDICT steps (there is no backward pass there).
TRAIN_ONLY_COLLECTIONS = frozenset({CollectionKeys.GRADIENTS, CollectionKeys.OPTIMIZER_VARIABLES})

#: Built-in collections and their regexes (PyTorch's names; the framework-free hook uses them too).
BUILTIN_REGEXES: dict[str, tuple[str, ...]] = {
    CollectionKeys.ALL: (),
    CollectionKeys.DEFAULT: (),
    CollectionKeys.WEIGHTS: (r"^(?!gradient).*weight",),
    CollectionKeys.BIASES: (r"^(?!gradient).*bias",),
    CollectionKeys.GRADIENTS: (r"^gradient",),
    CollectionKeys.LOSSES: (r"[Ll]oss_(?!input).*output",),
}


_CHANGES = 0  # bumped by every change of any collection: a cheap "did anything change?" test


def note_change() -> None:
    """Record a change that affects what is saved (for caches keyed on the change counter)."""
    global _CHANGES
    _CHANGES += 1


def change_count() -> int:
    """The process-wide collections version: it grows with every change of any collection (and every
    :func:`note_change`), so a cache that stored it is stale when it differs."""
    return _CHANGES


def compile_regex(pattern: str, where: str) -> re.Pattern[str]:
    """Compile ``pattern``; ConfigError naming ``where`` and the regex error if it is invalid."""
    if not isinstance(pattern, str):
        raise ConfigError(f"include_regex items must be strings, got {pattern!r}", where=where)
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ConfigError(f"include_regex {pattern!r} is not a valid Python regex: {err}", where=where) from err


def _committing(method: Callable[..., Any]) -> Callable[..., Any]:
    """A mutating list/set method that hands the new contents to the owner, and undoes the change if
    the owner refuses it (e.g. an invalid regex)."""

    def changed(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = list(self)
        result = method(self, *args, **kwargs)
        try:
            self._commit(self)
        except Exception:
            if isinstance(self, list):
                list.clear(self)
                list.extend(self, before)
            else:
                set.clear(self)
                set.update(self, before)
            raise
        return result

    changed.__name__ = method.__name__
    return changed


class _LiveRegexList(list[str]):
    """``Collection.include_regex`` as smdebug exposes it: a list the caller may change in place
    (``coll.include_regex.append(r)``). Every change goes through the collection, so a bad regex
    raises at once and what the hook saves follows the change."""

    def __init__(self, items: Iterable[str], commit: Callable[[Iterable[str]], None]) -> None:
        super().__init__(items)
        self._commit = commit

    def __repr__(self) -> str:
        return repr(list(self))


class _LiveNameSet(set[str]):
    """``Collection.tensor_names`` as smdebug exposes it: a set the caller may change in place."""

    def __init__(self, items: Iterable[str], commit: Callable[[Iterable[str]], None]) -> None:
        super().__init__(items)
        self._commit = commit

    def __repr__(self) -> str:
        return repr(set(self))


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
              "__setitem__", "__delitem__", "__iadd__", "__imul__"):
    setattr(_LiveRegexList, _name, _committing(getattr(list, _name)))
for _name in ("add", "discard", "remove", "pop", "clear", "update", "difference_update",
              "intersection_update", "symmetric_difference_update", "__ior__", "__iand__", "__isub__", "__ixor__"):
    setattr(_LiveNameSet, _name, _committing(getattr(set, _name)))


class Collection:
    """A named group of tensors and how to save them.

    smdebug's ``Collection`` API: ``include``, ``add_tensor_name``, ``remove_tensor_name``, the
    ``include_regex`` list and ``tensor_names`` set (assignable and changeable in place),
    ``to_json_dict``/``to_json``/``from_dict``/``from_json`` (the collections-file layout) and ``==``.
    """

    def __init__(
        self,
        name: str,
        include_regex: Iterable[str] | str | None = None,
        tensor_names: Iterable[str] | None = None,
        reduction_config: ReductionConfig | None = None,
        save_config: SaveConfig | SaveConfigMode | dict[object, object] | int | None = None,
        save_histogram: bool = True,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a collection name must be a non-empty string, got {name!r}", where="collection")
        self._name = name
        self._regex: list[str] = []
        self._compiled: list[re.Pattern[str]] = []
        self._tensor_names: set[str] = set()
        self._reduction_config: ReductionConfig | None = None
        self._save_config: SaveConfig | None = None
        self._save_histogram = True
        #: Framework modules whose inputs/outputs belong here: (module, inputs, outputs).
        self.modules: list[tuple[object, bool, bool]] = []
        #: Bumped on every change; caches of matches compare it.
        self.version = 0
        self._changed()
        if include_regex is not None:
            self.include(include_regex)
        for t in tensor_names or ():
            self.add_tensor_name(t)
        self.reduction_config = reduction_config
        self.save_config = save_config
        self.save_histogram = save_histogram

    def _changed(self) -> None:
        global _CHANGES
        self.version += 1
        _CHANGES += 1

    @property
    def name(self) -> str:
        return self._name

    @property
    def include_regex(self) -> list[str]:
        """The regexes; a list that may be changed in place (each change is checked)."""
        return _LiveRegexList(self._regex, self._set_regex)

    @include_regex.setter
    def include_regex(self, regexes: Iterable[str] | str | None) -> None:
        self._set_regex([] if regexes is None else [regexes] if isinstance(regexes, str) else regexes)

    def _set_regex(self, regexes: Iterable[str]) -> None:
        patterns = list(regexes)
        compiled = [compile_regex(p, f"collection {self._name!r}") for p in patterns]
        self._regex, self._compiled = [], []
        for pattern, comp in zip(patterns, compiled):
            if pattern not in self._regex:
                self._regex.append(pattern)
                self._compiled.append(comp)
        self._changed()

    @property
    def tensor_names(self) -> set[str]:
        """The tensor names; a set that may be changed in place."""
        return _LiveNameSet(self._tensor_names, self._set_names)

    @tensor_names.setter
    def tensor_names(self, names: Iterable[str] | None) -> None:
        if isinstance(names, (str, bytes)) or (names is not None and not isinstance(names, Iterable)):
            raise ConfigError(f"tensor_names must be a list or set of names, got {names!r}", where=f"collection {self._name!r}")
        self._set_names(names or ())

    def _set_names(self, names: Iterable[str]) -> None:
        new = set(names)
        bad = sorted(repr(n) for n in new if not isinstance(n, str))
        if bad:
            raise ConfigError(f"tensor names must be strings, got {', '.join(bad)}", where=f"collection {self._name!r}")
        self._tensor_names = new
        self._changed()

    @property
    def reduction_config(self) -> ReductionConfig | None:
        return self._reduction_config

    @reduction_config.setter
    def reduction_config(self, value: ReductionConfig | None) -> None:
        if value is not None and not isinstance(value, ReductionConfig):
            raise ConfigError(f"reduction_config must be a ReductionConfig, got {value!r}", where=f"collection {self._name!r}")
        self._reduction_config = value
        self._changed()

    @property
    def save_config(self) -> SaveConfig | None:
        return self._save_config

    @save_config.setter
    def save_config(self, value: SaveConfig | SaveConfigMode | dict[object, object] | int | None) -> None:
        self._save_config = None if value is None else SaveConfig.parse(value)
        self._changed()

    @property
    def save_histogram(self) -> bool:
        return self._save_histogram

    @save_histogram.setter
    def save_histogram(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise ConfigError(f"save_histogram must be True or False, got {value!r}", where=f"collection {self._name!r}")
        self._save_histogram = value
        self._changed()

    def include(self, regex: Iterable[str] | str) -> None:
        """Add one regex or several. Raises ConfigError for an invalid one."""
        patterns = [regex] if isinstance(regex, str) else list(regex)
        compiled = [compile_regex(p, f"collection {self._name!r}") for p in patterns]
        for pattern, comp in zip(patterns, compiled):
            if pattern not in self._regex:
                self._regex.append(pattern)
                self._compiled.append(comp)
        self._changed()

    def add_tensor_name(self, name: str) -> None:
        if name not in self._tensor_names:
            self._tensor_names.add(name)
            self._changed()

    def remove_tensor_name(self, name: str) -> None:
        """Forget ``name`` (nothing happens if it is not one of the tensor names)."""
        if name in self._tensor_names:
            self._tensor_names.discard(name)
            self._changed()

    def record_saved(self, name: str) -> bool:
        """Note that ``name`` was saved as a member (it already matches); True if it is new.

        Unlike :meth:`add_tensor_name` this does not change :attr:`version`: what matches is unchanged.
        """
        if name in self._tensor_names:
            return False
        self._tensor_names.add(name)
        return True

    def add_module_tensors(self, module: object, inputs: bool = False, outputs: bool = True) -> None:
        """Include a framework module's inputs and/or outputs (smdebug's PyTorch API).

        The hook turns this into regexes on the module's tensor names (``{module}_input_{i}``,
        ``{module}_output_{i}``) once the module is registered and its name is known.
        """
        self.modules.append((module, inputs, outputs))
        self._changed()

    def has_tensor_name(self, name: str) -> bool:
        return name in self._tensor_names

    def matches(self, tensor_name: str) -> bool:
        """Whether ``tensor_name`` belongs to this collection (by name or by regex)."""
        if tensor_name in self._tensor_names:
            return True
        return any(p.search(tensor_name) for p in self._compiled)

    def matches_regex(self, tensor_name: str) -> bool:
        return any(p.search(tensor_name) for p in self._compiled)

    def to_spec(
        self, *, default_save: SaveConfig | None = None, default_reduction: ReductionConfig | None = None
    ) -> CollectionSpec:
        """The collection as stored in a collections file, with unset configs filled from the defaults."""
        save = self._save_config
        if save is not None and default_save is not None:
            save = save.merged_with(default_save)
        elif save is None:
            save = default_save
        reduction = self._reduction_config or default_reduction
        return CollectionSpec(
            name=self._name,
            include_regex=tuple(self._regex),
            tensor_names=tuple(sorted(self._tensor_names)),
            reduction=None if reduction is None else reduction.to_spec(),
            save=None if save is None else save.to_spec(),
            save_histogram=self._save_histogram,
        )

    # --- smdebug's serialization: the layout of one entry of a collections file ---------------

    def to_json_dict(self) -> dict[str, Any]:
        """The collection as smdebug serializes it: unset configs are None (and so are unset modes
        of a save config), tensor names sorted."""
        return {
            "name": self._name,
            "include_regex": list(self._regex),
            "tensor_names": sorted(self._tensor_names),
            "reduction_config": None if self._reduction_config is None else self._reduction_config.to_json_dict(),
            "save_config": None if self._save_config is None else self._save_config.to_json_dict(),
            "save_histogram": self._save_histogram,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_json_dict())

    @classmethod
    def from_dict(cls, params: Mapping[str, Any]) -> Collection:
        """A collection from :meth:`to_json_dict`'s layout (an entry of a collections file).

        Raises:
            ConfigError: not such a dict; the message says which field is wrong.
        """
        if not isinstance(params, Mapping):
            raise ConfigError(f"a collection dict is expected, got {params!r}", where="collection")
        unknown = sorted(set(params) - {"name", "include_regex", "tensor_names", "reduction_config", "save_config",
                                        "save_histogram"})
        if unknown:
            raise ConfigError(f"unknown keys {unknown}; a collection has name, include_regex, tensor_names, "
                              "reduction_config, save_config, save_histogram", where="collection")
        reduction = params.get("reduction_config")
        save = params.get("save_config")
        return cls(
            params.get("name"),  # type: ignore[arg-type]  # checked by the constructor
            include_regex=params.get("include_regex") or None,
            tensor_names=params.get("tensor_names") or None,
            reduction_config=None if reduction is None else ReductionConfig.from_dict(reduction),
            save_config=None if save is None else SaveConfig.from_dict(save),
            save_histogram=params.get("save_histogram", True),
        )

    @classmethod
    def from_json(cls, text: str) -> Collection:
        try:
            params = json.loads(text)
        except ValueError as err:
            raise ConfigError(f"not a collection JSON string: {err}", where="collection") from err
        return cls.from_dict(params)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Collection):
            return NotImplemented
        return (
            self._name == other._name
            and self._regex == other._regex
            and self._tensor_names == other._tensor_names
            and self._reduction_config == other._reduction_config
            and self._save_config == other._save_config
            and self._save_histogram == other._save_histogram
        )

    def __hash__(self) -> int:
        return hash(self._name)

    def __str__(self) -> str:
        return str(self.to_json_dict())

    def __repr__(self) -> str:
        return (
            f"Collection({self._name!r}, include_regex={self._regex!r}, tensor_names={sorted(self._tensor_names)!r}, "
            f"reduction_config={self._reduction_config!r}, save_config={self._save_config!r}, "
            f"save_histogram={self._save_histogram!r})"
        )


class CollectionManager:
    """The collections of one hook, in creation order.

    smdebug's ``CollectionManager`` API too: ``collections`` (a read-only name -> Collection view; add
    with :meth:`add`), ``create_collection``, ``add`` of a name, ``export``/``load`` of a collections
    file, ``to_json_dict`` and ``==`` (same collections).
    """

    def __init__(self, collections: Iterable[Collection] | Mapping[str, Collection] | None = None,
                 create_default: bool = False) -> None:
        self._collections: dict[str, Collection] = {}
        self._adds = 0
        self._num_workers = 1
        for c in (collections.values() if isinstance(collections, Mapping) else collections or ()):
            self.add(c)
        if create_default:
            self.create_collection(CollectionKeys.DEFAULT)

    @property
    def collections(self) -> Mapping[str, Collection]:
        """Name -> collection (read-only: :meth:`add` or :meth:`get` change it)."""
        return MappingProxyType(self._collections)

    def create_collection(self, name: str, cls: type[Collection] | None = None) -> None:
        """Create an empty collection ``name`` (of class ``cls``) unless one exists."""
        if name not in self._collections:
            self.add((cls or Collection)(name))

    @classmethod
    def with_builtins(cls, regexes: dict[str, tuple[str, ...]] | None = None) -> CollectionManager:
        """A manager holding the built-in collections (``all, default, weights, biases, gradients, losses``)."""
        manager = cls()
        for name, patterns in (BUILTIN_REGEXES if regexes is None else regexes).items():
            manager.add(Collection(name, include_regex=patterns))
        return manager

    def add(self, collection: Collection | str) -> None:
        """Add (or replace, keeping its position) a collection; a name adds an empty one unless it exists."""
        if isinstance(collection, str):
            self.create_collection(collection)
            return
        if not isinstance(collection, Collection):
            raise ConfigError(f"expected a Collection or a name, got {collection!r}", where="collections")
        self._collections[collection.name] = collection
        self._adds += 1

    def get(self, name: str, create: bool = True) -> Collection:
        """The collection ``name``, created empty if missing and ``create``.

        Raises:
            KeyError: missing and ``create`` is False.
        """
        coll = self._collections.get(name)
        if coll is None:
            if not create:
                raise KeyError(f"no collection named {name!r}; known: {', '.join(self._collections)}")
            coll = Collection(name)
            self._collections[name] = coll
            self._adds += 1
        return coll

    def get_collections(self) -> dict[str, Collection]:
        return dict(self._collections)

    def __contains__(self, name: object) -> bool:
        return name in self._collections

    def __iter__(self) -> Iterator[Collection]:
        return iter(list(self._collections.values()))

    def __len__(self) -> int:
        return len(self._collections)

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever a collection (of any manager) changes or one is added or replaced here."""
        return _CHANGES, self._adds

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectionManager):
            return NotImplemented
        return self._collections == other._collections

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by content

    def __repr__(self) -> str:
        return f"<CollectionManager: {list(self._collections)}>"

    # --- smdebug's collections file API --------------------------------------------------------

    def get_num_workers(self) -> int:
        return self._num_workers

    def set_num_workers(self, num_workers: int) -> None:
        self._num_workers = int(num_workers)

    def update_meta(self, meta: Mapping[str, Any]) -> None:
        """Take ``num_workers`` from a collections file's ``_meta``."""
        if not isinstance(meta, Mapping):
            raise ConfigError(f"meta must be a dict, got {meta!r}", where="collections")
        if "num_workers" in meta:
            self.set_num_workers(meta["num_workers"])

    def to_json_dict(self) -> dict[str, Any]:
        """The collections file document (configs as set, not resolved against a hook's)."""
        return {"collections": {n: c.to_json_dict() for n, c in self._collections.items()},
                "_meta": {"num_workers": self._num_workers}}

    def export(self, out_dir: str | os.PathLike[str], filename: str) -> None:
        """Write the collections file ``{out_dir}/collections/000000000/{filename}`` (local or ``s3://``).

        The file appears whole under its name (a reader never sees part of it). Raises StorageError if it
        cannot be written.
        """
        data = json.dumps(self.to_json_dict()).encode("utf-8")
        open_storage(out_dir).write(f"{COLLECTIONS_DIR}/{filename}", data)

    @classmethod
    def load(cls, filename: str | os.PathLike[str], collection_class: type[Collection] = Collection) -> CollectionManager:
        """The collections of a collections file (what :meth:`export` or a hook wrote)."""
        with open(filename, encoding="utf-8") as f:
            return cls.load_from_string(f.read(), collection_class)

    @classmethod
    def load_from_string(cls, text: str, collection_class: type[Collection] = Collection) -> CollectionManager:
        """Raises ConfigError naming what is wrong if ``text`` is not a collections document."""
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise ConfigError(f"not a collections JSON document: {err}", where="collections file") from err
        if not isinstance(doc, dict) or set(doc) - {"collections", "_meta"}:
            raise ConfigError("a collections document is an object with only 'collections' and '_meta'",
                              where="collections file")
        manager = cls()
        collections = doc.get("collections") or {}
        if not isinstance(collections, dict):
            raise ConfigError("'collections' must map names to collections", where="collections file")
        for params in collections.values():
            manager.add(collection_class.from_dict(params))
        manager.update_meta(doc.get("_meta") or {})
        return manager

    def effective_reduction(self, coll: Collection, default: ReductionConfig) -> ReductionConfig:
        """The reduction config ``coll`` is saved with."""
        if coll.name in NON_REDUCTION_COLLECTIONS:
            return RAW_ONLY
        return coll.reduction_config or default

    def to_file(self, *, num_workers: int, default_save: SaveConfig, default_reduction: ReductionConfig) -> CollectionsFile:
        """The collections file content, every collection's configs resolved against the hook's."""
        specs = {}
        for c in self._collections.values():
            spec = c.to_spec(default_save=default_save, default_reduction=self.effective_reduction(c, default_reduction))
            if c.name in SCALAR_COLLECTIONS and spec.save_histogram:
                spec = CollectionSpec(spec.name, spec.include_regex, spec.tensor_names, spec.reduction, spec.save, False)
            specs[c.name] = spec
        return CollectionsFile(specs, num_workers)


__all__ = [
    "BUILTIN_REGEXES",
    "KNOWN_NAMES",
    "NON_REDUCTION_COLLECTIONS",
    "SCALAR_COLLECTIONS",
    "TRAIN_ONLY_COLLECTIONS",
    "Collection",
    "CollectionKeys",
    "CollectionManager",
    "change_count",
    "compile_regex",
    "note_change",
]
