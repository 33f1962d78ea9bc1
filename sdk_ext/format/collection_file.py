"""Collections files: the collection definitions of one worker, and the number of workers.

One line of JSON (``json.dumps`` defaults). Example (abridged)::

    {"collections": {
       "weights": {"name": "weights", "include_regex": ["^(?!gradient).*weight"],
                   "tensor_names": ["Net_fc1.weight"],
                   "reduction_config": {"save_raw_tensor": true, "reductions": "l2_norm", "save_shape": false},
                   "save_config": {"TRAIN": {"save_interval": 500, "save_steps": [], "start_step": 0,
                                             "end_step": null}, "EVAL": {...}, "PREDICT": {...}, "GLOBAL": {...}},
                   "save_histogram": true}, ...},
     "_meta": {"num_workers": 1}}

``tensor_names`` is sorted. ``reductions`` is a csv in config spelling (``mean``, ``abs_max``,
``l2_norm``, ``abs_l1_norm``). ``reduction_config`` and ``save_config`` may be null, and so may one mode of a
``save_config`` (a mode the collection leaves to the hook's config).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.modes import ALL_MODES, ModeKeys


@dataclass(frozen=True, slots=True)
class ReductionSpec:
    """A collection's reduction config as stored: ``reductions`` in config spelling and order."""

    reductions: tuple[str, ...] = ()
    save_raw_tensor: bool = True
    save_shape: bool = False


@dataclass(frozen=True, slots=True)
class SaveSpec:
    """When a collection is saved in one mode."""

    save_interval: int = 500
    save_steps: tuple[int, ...] = ()
    start_step: int = 0
    end_step: int | None = None


@dataclass(frozen=True, slots=True)
class CollectionSpec:
    name: str
    include_regex: tuple[str, ...] = ()
    tensor_names: tuple[str, ...] = ()
    reduction: ReductionSpec | None = None
    save: dict[ModeKeys, SaveSpec] | None = None
    save_histogram: bool = True


@dataclass(frozen=True, slots=True)
class CollectionsFile:
    collections: dict[str, CollectionSpec]  # in file order
    num_workers: int


def collection_to_dict(spec: CollectionSpec) -> dict[str, Any]:
    """One collection as the file stores it (smdebug's ``Collection.to_json_dict()``)."""
    reduction = None
    if spec.reduction is not None:
        reduction = {
            "save_raw_tensor": spec.reduction.save_raw_tensor,
            "reductions": ",".join(spec.reduction.reductions),
            "save_shape": spec.reduction.save_shape,
        }
    save = None
    if spec.save is not None:
        save = {
            mode.name: {
                "save_interval": s.save_interval,
                "save_steps": list(s.save_steps),
                "start_step": s.start_step,
                "end_step": s.end_step,
            }
            for mode in ALL_MODES
            if (s := spec.save.get(mode)) is not None
        }
    return {
        "name": spec.name,
        "include_regex": list(spec.include_regex),
        "tensor_names": sorted(spec.tensor_names),
        "reduction_config": reduction,
        "save_config": save,
        "save_histogram": spec.save_histogram,
    }


def encode_collections(file: CollectionsFile) -> bytes:
    """The collections document, byte for byte as smdebug writes it."""
    doc = {
        "collections": {name: collection_to_dict(spec) for name, spec in file.collections.items()},
        "_meta": {"num_workers": file.num_workers},
    }
    return json.dumps(doc).encode("utf-8")


def _fail(key: str, what: str) -> IndexReaderException:
    return IndexReaderException(f"{key}: {what}; the collections file is corrupt or not written by a Debugger hook")


def _bool(value: object, key: str, what: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(key, f"{what} must be a JSON boolean, got {value!r}")
    return value


def _int(value: object, key: str, what: str, *, nullable: bool = False) -> Any:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(key, f"{what} must be an integer, got {value!r}")
    return value


def _parse_collection(name: str, doc: object, key: str) -> CollectionSpec:
    if not isinstance(doc, dict):
        raise _fail(key, f"collection {name!r} is not an object")
    reduction = None
    rdoc = doc.get("reduction_config")
    if rdoc is not None:
        if not isinstance(rdoc, dict):
            raise _fail(key, f"reduction_config of {name!r} is not an object")
        csv = rdoc.get("reductions", "")
        if not isinstance(csv, str):
            raise _fail(key, f"reductions of {name!r} is not a string")
        reduction = ReductionSpec(
            tuple(r.strip() for r in csv.split(",") if r.strip()),
            _bool(rdoc.get("save_raw_tensor", False), key, f"{name}.save_raw_tensor"),
            _bool(rdoc.get("save_shape", False), key, f"{name}.save_shape"),
        )
    save = None
    sdoc = doc.get("save_config")
    if sdoc is not None:
        if not isinstance(sdoc, dict):
            raise _fail(key, f"save_config of {name!r} is not an object")
        save = {}
        for mode_name, m in sdoc.items():
            if mode_name not in ModeKeys.__members__:
                raise _fail(key, f"save_config of {name!r} has unknown mode {mode_name!r}")
            if m is None:  # a mode the collection's save config leaves unset (smdebug writes null)
                continue
            if not isinstance(m, dict):
                raise _fail(key, f"save_config.{mode_name} of {name!r} is not an object")
            steps = m.get("save_steps", [])
            if not isinstance(steps, list):
                raise _fail(key, f"save_steps of {name!r} is not a list")
            save[ModeKeys[mode_name]] = SaveSpec(
                _int(m.get("save_interval", 500), key, "save_interval"),
                tuple(_int(s, key, "save_steps item") for s in steps),
                _int(m.get("start_step", 0), key, "start_step"),
                _int(m.get("end_step"), key, "end_step", nullable=True),
            )
    regex = doc.get("include_regex") or []
    names = doc.get("tensor_names") or []
    if not isinstance(regex, list) or not all(isinstance(r, str) for r in regex):
        raise _fail(key, f"include_regex of {name!r} is not a list of strings")
    for pattern in regex:  # a writer stores patterns that compile: one that does not is damage
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError) as err:
            raise _fail(key, f"include_regex {pattern!r} of collection {name!r} is not a regular expression ({err})") from err
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _fail(key, f"tensor_names of {name!r} is not a list of strings")
    return CollectionSpec(
        name=str(doc.get("name", name)),
        include_regex=tuple(regex),
        tensor_names=tuple(names),
        reduction=reduction,
        save=save,
        save_histogram=_bool(doc.get("save_histogram", True), key, f"{name}.save_histogram"),
    )


def parse_collections(data: bytes, *, key: str = "<collections>") -> CollectionsFile:
    """Parse a collections document.

    Raises:
        IndexReaderException: not JSON, unknown top-level keys, no ``_meta``, or malformed collections.
    """
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise _fail(key, f"not valid JSON ({err})") from err
    except RecursionError as err:  # nesting deeper than the interpreter's limit: not a file any writer makes
        raise _fail(key, "not valid JSON (nested too deeply to parse)") from err
    if not isinstance(doc, dict):
        raise _fail(key, "top level is not an object")
    extra = set(doc) - {"collections", "_meta"}
    if extra:
        raise _fail(key, f"unexpected top-level keys {sorted(extra)}")
    meta = doc.get("_meta")
    if not isinstance(meta, dict) or "num_workers" not in meta:
        raise _fail(key, "_meta.num_workers is missing")
    num_workers = _int(meta["num_workers"], key, "_meta.num_workers")
    if num_workers < 1:
        raise _fail(key, f"_meta.num_workers must be at least 1, got {num_workers}")
    colls = doc.get("collections") or {}
    if not isinstance(colls, dict):
        raise _fail(key, "collections is not an object")
    return CollectionsFile({name: _parse_collection(name, c, key) for name, c in colls.items()}, num_workers)


__all__ = [
    "CollectionSpec",
    "CollectionsFile",
    "ReductionSpec",
    "SaveSpec",
    "collection_to_dict",
    "encode_collections",
    "parse_collections",
]
