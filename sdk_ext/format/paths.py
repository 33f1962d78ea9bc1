"""Key names under a trial root (identical on local disk and S3), and reduction tensor names.

    events/{S:012d}/{S:012d}_{W}.tfevents           one event file per saved global step S per worker W
    index/{S//1000:09d}/{S:012d}_{W}.json           its index
    collections/000000000/{W}_collections.json       one per worker
    training_job_end.ts                             empty marker: training has ended
    tensorboard/{MODE}/{S:012d}_{pid}_{host}.tfevents

Step numbers wider than the padding simply get longer. A worker name that is a TensorFlow device
(``/job:worker/replica:0/task:1/device:GPU:0``) is stored with ``/``->``_`` and ``:``->``-``, so its
stored form starts with ``_``; only such names are turned back (smdebug also turned back any name
whose *path* contains ``__``, which mangled ``worker_0`` into ``worker/0``).
"""

from __future__ import annotations

import re

EVENTS_DIR = "events"
INDEX_DIR = "index"
COLLECTIONS_DIR = "collections/000000000"
END_OF_JOB = "training_job_end.ts"
TENSORBOARD_DIR = "tensorboard"
CLAIM_FILE = "claim.smd"
INDEX_BUCKET = 1000
DEFAULT_WORKER = "worker_0"

REDUCTION_PREFIX = "smdebug/reductions/"
#: Reduction ops on the raw value and the norms; names as they appear in tensor names.
REDUCTION_OPS = ("min", "max", "mean", "std", "variance", "sum", "prod")
NORM_OPS = ("l1", "l2")
ALL_OPS = REDUCTION_OPS + NORM_OPS

_INDEX_RE = re.compile(r"(?:^|/)index/\d+/(\d+)_(.+)\.json$")
_INDEX_PREFIX = INDEX_DIR + "/"
_EVENT_RE = re.compile(r"(?:^|/)events/\d+/(\d+)_(.+)\.tfevents$")
_COLLECTIONS_RE = re.compile(r"(?:^|/)collections/[^/]+/(.+)_collections\.json$")
_COLON_INDEX = re.compile(r":\d+")


def serialize_worker(worker: str) -> str:
    """A worker name as it appears in file names."""
    return worker.replace("/", "_").replace(":", "-")


def deserialize_worker(stored: str) -> str:
    """The worker name for its stored form (only device names, which start with ``_``, change)."""
    if stored.startswith("_"):
        return stored.replace("_", "/").replace("-", ":")
    return stored


def event_key(step: int, worker: str) -> str:
    return f"{EVENTS_DIR}/{step:012d}/{step:012d}_{serialize_worker(worker)}.tfevents"


def index_key(step: int, worker: str) -> str:
    return f"{INDEX_DIR}/{step // INDEX_BUCKET:09d}/{step:012d}_{serialize_worker(worker)}.json"


def index_prefix_for_step(step: int) -> str:
    """The index bucket directory holding ``step``, with a trailing slash."""
    return f"{INDEX_DIR}/{step // INDEX_BUCKET:09d}/"


def collections_key(worker: str) -> str:
    return f"{COLLECTIONS_DIR}/{serialize_worker(worker)}_collections.json"


def tensorboard_key(mode_name: str, step: int, pid: int, hostname: str) -> str:
    return f"{mode_name}/{step:012d}_{pid}_{hostname}.tfevents"


def parse_index_key(key: str) -> tuple[int, str] | None:
    """``(global step, worker)`` of an index key, or None if ``key`` is not an index file (e.g. ``.tmp``)."""
    if key.startswith(_INDEX_PREFIX) and key.endswith(".json"):  # the usual key, without the regex: a trial has many
        bucket, slash, name = key[len(_INDEX_PREFIX) : -5].partition("/")
        step, _, worker = name.partition("_")
        if slash and worker and "/" not in name and "\n" not in worker and bucket.isdecimal() and step.isdecimal() and bucket.isascii() \
                and step.isascii():
            return int(step), deserialize_worker(worker)
    match = _INDEX_RE.search(key)
    if match is None:
        return None
    return int(match.group(1)), deserialize_worker(match.group(2))


def parse_event_key(key: str) -> tuple[int, str] | None:
    """``(global step, worker)`` of an event file key, or None."""
    match = _EVENT_RE.search(key)
    if match is None:
        return None
    return int(match.group(1)), deserialize_worker(match.group(2))


def parse_collections_key(key: str) -> str | None:
    """The worker of a collections file key, or None."""
    match = _COLLECTIONS_RE.search(key)
    if match is None:
        return None
    return deserialize_worker(match.group(1))


def reduction_tensor_name(tensor_name: str, op: str, *, abs: bool = False) -> str:
    """The name a reduction of ``tensor_name`` is stored under (``:N`` suffixes are dropped, as smdebug does).

    ``op`` is one of :data:`ALL_OPS`; config spellings ``l1_norm``/``l2_norm`` are accepted too.
    """
    op = {"l1_norm": "l1", "l2_norm": "l2"}.get(op, op)
    if op not in ALL_OPS:
        raise ValueError(f"unknown reduction {op!r}: use one of {', '.join(ALL_OPS)}")
    body = _COLON_INDEX.sub("", f"{op}/{tensor_name}")
    return REDUCTION_PREFIX + ("abs_" if abs else "") + body


def parse_reduction_name(name: str) -> tuple[str, str, bool] | None:
    """``(base tensor name, op, abs)`` of a stored reduction name, or None for an ordinary tensor."""
    at = name.find(REDUCTION_PREFIX)
    if at < 0:
        return None
    rest = name[at + len(REDUCTION_PREFIX) :]
    op, sep, base = rest.partition("/")
    if not sep:
        return None
    is_abs = op.startswith("abs_")
    if is_abs:
        op = op[4:]
    return base, op, is_abs


__all__ = [
    "ALL_OPS",
    "CLAIM_FILE",
    "COLLECTIONS_DIR",
    "DEFAULT_WORKER",
    "END_OF_JOB",
    "EVENTS_DIR",
    "INDEX_BUCKET",
    "INDEX_DIR",
    "NORM_OPS",
    "REDUCTION_OPS",
    "REDUCTION_PREFIX",
    "TENSORBOARD_DIR",
    "collections_key",
    "deserialize_worker",
    "event_key",
    "index_key",
    "index_prefix_for_step",
    "parse_collections_key",
    "parse_event_key",
    "parse_index_key",
    "parse_reduction_name",
    "reduction_tensor_name",
    "serialize_worker",
    "tensorboard_key",
]
