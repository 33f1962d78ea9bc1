"""The reader does not trust the index: each damaged variant makes its own step unreadable with an
error naming the file, never another tensor's values, a file outside the trial or a huge allocation."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import DamagedDataError, IndexReaderException, SdkExtError
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import TrialOptions, create_trial
from tests.trial_builder import TrialBuilder

STEPS = 20
DAMAGED = 7
INDEX = f"index/000000000/{DAMAGED:012d}_worker_0.json"


def value(step: int, k: int) -> np.ndarray[Any, Any]:
    return np.full(4, step * 10 + k, np.float32)


def build(root: Path) -> LocalStorage:
    storage = LocalStorage(root)
    b = TrialBuilder(storage)
    b.collections()
    for step in range(STEPS):
        b.step(step, tensors={"a": value(step, 0), "b": value(step, 1), "c": value(step, 2)})
    b.end()
    return storage


def edit(storage: LocalStorage, change: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(storage.read(INDEX))
    change(doc)
    storage.write(INDEX, json.dumps(doc).encode())


def entry(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e for e in doc["tensor_payload"] if e["tensorname"] == name)


def set_event(name: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["meta"]["event_file_name"] = name

    return change


def swap_offsets(doc: dict[str, Any]) -> None:
    a, b = entry(doc, "a"), entry(doc, "b")
    a["start_idx"], b["start_idx"] = b["start_idx"], a["start_idx"]


def rename(doc: dict[str, Any]) -> None:
    entry(doc, "c")["tensorname"] = "a"  # two entries named a: the last wins, and it is c's record


def duplicate(doc: dict[str, Any]) -> None:
    entry(doc, "b")["start_idx"] = entry(doc, "a")["start_idx"]


def huge(doc: dict[str, Any]) -> None:
    entry(doc, "a")["length"] = 2**39


def past_the_end(doc: dict[str, Any]) -> None:
    entry(doc, "a")["start_idx"] = 10**6


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A copy of a real event file outside the trial, which a confined reader never opens."""
    trial = tmp_path / "trial"
    storage = build(trial)
    copy = tmp_path / "outside.tfevents"
    copy.write_bytes(storage.read(f"events/{DAMAGED + 1:012d}/{DAMAGED + 1:012d}_worker_0.tfevents"))
    return copy


# variants whose index file is refused when read (its step unreadable, IndexReaderException naming it)
REFUSED: dict[str, Callable[[LocalStorage], None]] = {
    "relative path out of the trial": lambda s: edit(s, set_event("../outside.tfevents")),
    "deep relative path": lambda s: edit(s, set_event("../../../../etc/passwd")),
    "dot-dot inside events/": lambda s: edit(
        s, set_event(f"events/../../outside/{DAMAGED:012d}/{DAMAGED:012d}_worker_0.tfevents")),
    "absolute path": lambda s: edit(s, set_event("/etc/passwd")),
    "another step's event file": lambda s: edit(
        s, set_event(f"events/{DAMAGED + 1:012d}/{DAMAGED + 1:012d}_worker_0.tfevents")),
    "another worker's event file": lambda s: edit(
        s, set_event(f"events/{DAMAGED:012d}/{DAMAGED:012d}_worker_1.tfevents")),
    "truncated JSON": lambda s: s.write(INDEX, s.read(INDEX)[:-10]),
    "not UTF-8": lambda s: s.write(INDEX, s.read(INDEX).replace(b"worker_0", b"worker_\xff", 1)),
    "not UTF-8 in event_file_name only": lambda s: s.write(
        INDEX, s.read(INDEX).replace(b"_worker_0.tfevents", b"_worker_\xff.tfevents", 1)),
    "nested too deeply": lambda s: s.write(INDEX, b"[" * 200_000 + b"]" * 200_000),
    "empty file": lambda s: s.write(INDEX, b""),
    "a list, not an object": lambda s: s.write(INDEX, b"[]"),
    "negative offset": lambda s: edit(s, lambda d: entry(d, "a").update(start_idx=-1)),
    "offset as a string": lambda s: edit(s, lambda d: entry(d, "a").update(start_idx="0")),
    "no meta": lambda s: edit(s, lambda d: d.pop("meta")),
    "unknown mode": lambda s: edit(s, lambda d: d["meta"].update(mode="TRAINING")),
}

# variants whose index parses, but whose entry disagrees with the record or the file it points to
MISMATCHED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "swapped offsets": (swap_offsets, "a"),
    "renamed entry": (rename, "a"),
    "duplicate entry": (duplicate, "b"),
    "length of 2**39": (huge, "a"),
    "offset past the end of the file": (past_the_end, "a"),
}


@pytest.mark.parametrize(
    "options",
    [TrialOptions(), TrialOptions(whole_file_bytes=0), TrialOptions(file_cache_bytes=1000)],
    ids=["whole files", "ranged reads", "gathered records"],
)
@pytest.mark.parametrize("variant", sorted(REFUSED))
def test_a_refused_index_file_makes_only_its_step_unreadable(tmp_path, outside, caplog, variant, options):
    storage = LocalStorage(tmp_path / "trial")
    REFUSED[variant](storage)
    with caplog.at_level(logging.WARNING, logger="sdk_ext"):
        trial = create_trial(storage, options=options, timeout=0)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and INDEX in warned[0]  # one warning at open, naming the file
    assert trial.steps() == [s for s in range(STEPS) if s != DAMAGED]
    with pytest.raises(IndexReaderException, match=rf"step {DAMAGED} .*{INDEX}"):
        trial.tensor("a").value(DAMAGED)
    for name, k in (("a", 0), ("b", 1), ("c", 2)):  # every other step reads back exactly
        got = {s: trial.tensor(name).value(s) for s in trial.tensor(name).steps()}
        assert sorted(got) == trial.steps()
        assert all(np.array_equal(v, value(s, k)) for s, v in got.items())
        with pytest.raises(IndexReaderException, match=INDEX):  # all steps at once: never a silent gap
            trial.tensor(name).values()


def read_damaged(trial: Any, name: str, how: str) -> Any:
    if how == "value":
        return trial.tensor(name).value(DAMAGED)
    if how == "walk":  # value() step after step: the read-ahead window covers the damaged step
        return [trial.tensor(name).value(s) for s in trial.tensor(name).steps()]
    return trial.tensor(name).values()


@pytest.mark.parametrize("how", ["value", "walk", "values"])
@pytest.mark.parametrize(
    "options",
    [TrialOptions(), TrialOptions(whole_file_bytes=0), TrialOptions(file_cache_bytes=1000)],
    ids=["whole files", "ranged reads", "gathered records"],
)
@pytest.mark.parametrize("variant", sorted(MISMATCHED))
def test_an_entry_that_disagrees_with_its_record_never_returns_other_values(
    tmp_path, outside, variant, options, how
):
    storage = LocalStorage(tmp_path / "trial")
    change, name = MISMATCHED[variant]
    edit(storage, change)
    trial = create_trial(storage, options=options, timeout=0)
    event = f"events/{DAMAGED:012d}/{DAMAGED:012d}_worker_0.tfevents"
    with pytest.raises(DamagedDataError) as err:  # damage, never "not available" (TensorUnavailableForStep)
        read_damaged(trial, name, how)
    chain = f"{err.value} {err.value.__cause__ or ''}"
    assert event in chain or f"step {DAMAGED}" in chain  # says which file or step
    assert trial.tensor(name).value(DAMAGED + 1).tolist() == value(DAMAGED + 1, "abc".index(name)).tolist()


def test_no_damaged_index_reads_the_file_it_names_outside_the_trial(tmp_path, outside):
    storage = LocalStorage(tmp_path / "trial")
    edit(storage, set_event("../outside.tfevents"))
    trial = create_trial(storage, timeout=0)
    with pytest.raises(SdkExtError):
        trial.tensor("a").value(DAMAGED)  # the copy outside would have decoded to step 8's values


def test_a_storage_key_that_climbs_out_of_the_root_is_refused(tmp_path):
    storage = LocalStorage(tmp_path / "trial")
    (tmp_path / "secret").write_bytes(b"x")
    with pytest.raises(SdkExtError, match="'..' segment"):
        storage.read("events/../../secret")
    storage.write("events/a..b/..c", b"y")  # '..' inside a name is a name
    assert storage.read("events/a..b/..c") == b"y"


@pytest.mark.parametrize(
    "options",
    [TrialOptions(), TrialOptions(whole_file_bytes=0), TrialOptions(file_cache_bytes=1000)],
    ids=["whole files", "ranged reads", "gathered records"],
)
def test_an_empty_event_file_name_means_the_steps_own_event_file(tmp_path, caplog, options):
    """smdebug's own trial-building test helpers write ``"event_file_name": ""``; smdebug lists such a step.
    It is not damage: the name points nowhere, so the step's own event file (its usual place) is read."""
    storage = build(tmp_path / "trial")
    edit(storage, set_event(""))
    with caplog.at_level(logging.WARNING):
        trial = create_trial(str(tmp_path / "trial"), options=options)
    assert trial.steps() == list(range(STEPS))
    assert not [r for r in caplog.records if "cannot be read" in r.getMessage()]
    np.testing.assert_array_equal(trial.tensor("b").value(DAMAGED), value(DAMAGED, 1))
    assert [v[0] for v in trial.tensor("a").values().values()] == [value(s, 0)[0] for s in range(STEPS)]
