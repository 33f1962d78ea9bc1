"""Collections: named groups of tensors (by regex or by name) sharing a save and a reduction config.

A tensor belongs to a collection when its name is one of the collection's ``tensor_names`` or when
any of its ``include_regex`` patterns matches anywhere in the name (``re.search``). A collection
without its own ``save_config``/``reduction_config`` uses the hook's. The scalar collections
(``losses``, ``metrics``, ``sm_metrics``...) always save raw values and never histograms.

Collections are configured before training starts; a bad regex raises at once. The manager keeps
collections in the order they were first created, so the collections file is deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from sdk_ext.exceptions import ConfigError
from sdk_ext.format.collection_file import CollectionsFile, CollectionSpec
from sdk_ext.hooks.reduction_config import RAW_ONLY, ReductionConfig
from sdk_ext.hooks.save_config import SaveConfig, SaveConfigMode


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


class Collection:
    """A named group of tensors and how to save them."""

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
        return list(self._regex)

    @property
    def tensor_names(self) -> set[str]:
        return set(self._tensor_names)

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

    def __repr__(self) -> str:
        return (
            f"Collection({self._name!r}, include_regex={self._regex!r}, tensor_names={sorted(self._tensor_names)!r}, "
            f"reduction_config={self._reduction_config!r}, save_config={self._save_config!r}, "
            f"save_histogram={self._save_histogram!r})"
        )


class CollectionManager:
    """The collections of one hook, in creation order."""

    def __init__(self, collections: Iterable[Collection] = ()) -> None:
        self._collections: dict[str, Collection] = {}
        self._adds = 0
        for c in collections:
            self.add(c)

    @classmethod
    def with_builtins(cls, regexes: dict[str, tuple[str, ...]] | None = None) -> CollectionManager:
        """A manager holding the built-in collections (``all, default, weights, biases, gradients, losses``)."""
        manager = cls()
        for name, patterns in (BUILTIN_REGEXES if regexes is None else regexes).items():
            manager.add(Collection(name, include_regex=patterns))
        return manager

    def add(self, collection: Collection) -> None:
        """Add (or replace, keeping its position) a collection."""
        if not isinstance(collection, Collection):
            raise ConfigError(f"expected a Collection, got {collection!r}", where="collections")
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
