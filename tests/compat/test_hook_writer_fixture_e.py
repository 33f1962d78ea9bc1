"""Byte equality with fixture e_spec_writer_two_workers (inputs: its README and docs/FORMAT.md#event-payload).

Inputs per (global step s, worker w), k = 10*s + w, wall time 1700000000.25:
layer/weight = float32(((k+1) * linspace(-11/14, 11/14, 12)).reshape(3, 4)) with reductions mean, l2,
abs_max and a shape entry; layer/bias = k * [-1., 0., 1.]; counts = int64 [k, -k, 2k];
flags = [w == 0, True, False]; loss = float32 0-d 1/(k+1); scalar/lr = [0.01 * (k+1)];
names = ["a", "w{w}"]; shape only: shape_only/t (7, 5). Steps: TRAIN 0-2, EVAL 0-1 (global 3-4),
TRAIN 3 at global step 1000. Two workers, num_workers 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.format import checksums
from sdk_ext.format.checksums import crc32c
from sdk_ext.format.consolidated import CONSOLIDATED_DIR, consolidated_key, parse_consolidated
from sdk_ext.format.events import decode_tensor_event
from sdk_ext.format.index import parse_index
from sdk_ext.format.paths import reduction_tensor_name
from sdk_ext.format.records import iter_records
from sdk_ext.hooks import (
    Collection,
    CollectionManager,
    Hook,
    ReductionConfig,
    SaveConfig,
    TrialWriter,
)
from sdk_ext.hooks.reduction_config import RAW_ONLY
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from tests.conftest import SMDEBUG_FIXTURES

FIXTURE = SMDEBUG_FIXTURES / "e_spec_writer_two_workers" / "out"
WALL = 1700000000.25
STEPS = [(0, ModeKeys.TRAIN, 0), (1, ModeKeys.TRAIN, 1), (2, ModeKeys.TRAIN, 2),
         (3, ModeKeys.EVAL, 0), (4, ModeKeys.EVAL, 1), (1000, ModeKeys.TRAIN, 3)]
WEIGHT_RED = ReductionConfig(reductions=["mean"], norms=["l2"], abs_reductions=["max"], save_raw_tensor=True, save_shape=True)


def inputs(step: int, worker: int) -> dict[str, Any]:
    k = 10 * step + worker
    return {
        "layer/weight": ((k + 1) * np.linspace(-11 / 14, 11 / 14, 12)).astype(np.float32).reshape(3, 4),
        "layer/bias": k * np.array([-1.0, 0.0, 1.0]),
        "counts": np.array([k, -k, 2 * k], dtype=np.int64),
        "flags": np.array([worker == 0, True, False]),
        "loss": np.array(1 / (k + 1), dtype=np.float32),
        "lr": 0.01 * (k + 1),
        "names": np.array(["a", f"w{worker}"]),
        "shape_only/t": np.zeros((7, 5), dtype=np.float32),
    }


def fixture_collections() -> CollectionManager:
    every = SaveConfig(save_interval=1)
    return CollectionManager([
        Collection("weights", include_regex=["weight"], tensor_names=["layer/weight"], reduction_config=WEIGHT_RED,
                   save_config=every),
        Collection("biases", include_regex=["bias"], tensor_names=["layer/bias"], save_config=every),
        Collection("losses", tensor_names=["loss"], save_config=every),
        Collection("default", include_regex=["counts", "flags", "names", "^scalar/"], save_config=every),
        Collection("shapes", include_regex=["^shape_only/"], save_config=every,
                   reduction_config=ReductionConfig(save_raw_tensor=False, save_shape=True)),
    ])


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def smdebug_files(got: dict[str, bytes]) -> dict[str, bytes]:
    """What smdebug's writer makes; checks and drops sdk_ext's two additions: the consolidated index of each
    worker, which must hold exactly that worker's index files, and the checksum key in each index file's
    meta, whose CRCs must be those of its event file, of each record and of the document."""
    workers = sorted({k.rsplit("_", 2)[-2] + "_" + k.rsplit("_", 1)[-1][:-5] for k in got if k.startswith("index/")})
    assert sorted(k for k in got if k.startswith(CONSOLIDATED_DIR + "/")) == sorted(consolidated_key(w) for w in workers)
    for worker in workers:
        doc = parse_consolidated(got[consolidated_key(worker)])
        assert doc.worker == worker
        own = {k: v for k, v in got.items() if k.startswith("index/") and k.endswith(f"_{worker}.json")}
        assert {f"index/{s // 1000:09d}/{s:012d}_{worker}.json": h + t for s, h, t in doc.entries} == own
    out = {k: v for k, v in got.items() if not k.startswith(CONSOLIDATED_DIR + "/")}
    for key in [k for k in out if k.startswith("index/")]:
        index = parse_index(out[key], key=key)  # checks the document's own CRC
        assert index.checks is not None, key
        if index.event_file is not None:
            event = out[index.event_file]
            assert index.checks.file == crc32c(event)
            assert [index.checks.record(k) for k in range(index.checks.count)] == [
                crc32c(event[t.start : t.start + t.length]) for t in index.tensors
            ]
        out[key] = checksums.strip(out[key])
    return out


def test_writer_reproduces_fixture_e_byte_for_byte(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    manager = fixture_collections()
    for worker in (0, 1):
        writer = TrialWriter(storage, worker=f"worker_{worker}", clock=lambda: WALL)
        for step, mode, mode_step in STEPS:
            v = inputs(step, worker)
            w = v["layer/weight"]
            writer.open_step(step, mode, mode_step)
            writer.write_shape("layer/weight", w.shape)
            writer.write_tensor(reduction_tensor_name("layer/weight", "mean"), np.mean(w).reshape(1))
            writer.write_tensor(reduction_tensor_name("layer/weight", "l2"), np.linalg.norm(w, 2).reshape(1))
            writer.write_tensor(reduction_tensor_name("layer/weight", "max", abs=True), np.max(np.abs(w)).reshape(1))
            for name in ("layer/weight", "layer/bias", "counts", "flags", "loss"):
                writer.write_tensor(name, v[name])
            writer.write_tensor("scalar/lr", np.array([v["lr"]]))
            writer.write_tensor("names", v["names"])
            writer.write_shape("shape_only/t", (7, 5))
            assert writer.close_step()
        writer.write_collections(manager.to_file(num_workers=2, default_save=SaveConfig(save_interval=1),
                                                 default_reduction=RAW_ONLY))
        if worker == 1:
            writer.write_end_marker()
        writer.close()
    expected, got = tree(FIXTURE), smdebug_files(tree(tmp_path))
    assert sorted(got) == sorted(expected)
    for name in expected:
        assert got[name] == expected[name], name


def _run_hooks_like_fixture(out: Path) -> None:
    """Two workers' hooks side by side, as two ranks of one job would run."""
    hooks = [
        Hook(
            out,
            save_config=SaveConfig(save_interval=1),
            include_workers="all",
            rank=worker,
            world_size=2,
            include_collections=["weights", "biases", "default", "shapes"],
            include_regex=["counts", "flags", "names", "^scalar/"],
            collections=[
                Collection("weights", include_regex=["weight"], reduction_config=WEIGHT_RED),
                Collection("biases", include_regex=["bias"]),
                Collection("shapes", include_regex=["^shape_only/"],
                           reduction_config=ReductionConfig(save_raw_tensor=False, save_shape=True)),
            ],
            clock=lambda: WALL,
        )
        for worker in (0, 1)
    ]
    for step, mode, _ in STEPS:
        for worker, hook in enumerate(hooks):
            v = inputs(step, worker)
            hook.set_mode(mode)
            with hook.step(step):
                for name in ("layer/weight", "layer/bias", "counts", "flags"):
                    hook.save_tensor(name, v[name])
                hook.save_tensor("loss", v["loss"], collections_to_write="losses")
                hook.save_scalar("lr", v["lr"])
                hook.save_tensor("names", v["names"])
                hook.save_tensor("shape_only/t", v["shape_only/t"], collections_to_write="shapes")
    for hook in hooks:
        hook.close()
        assert hook.failure is None


def test_hook_writes_fixture_e_event_and_index_bytes(tmp_path: Path) -> None:
    """Through the Hook: index files identical, event files identical except the l2 values.

    Deliberate difference: the fixture's l2 of the 3x4 weight is numpy's matrix (spectral) norm, as
    smdebug's numpy path computed it; sdk_ext's l2 is element-wise (Frobenius) in every hook.
    """
    _run_hooks_like_fixture(tmp_path)
    expected, got = tree(FIXTURE), smdebug_files(tree(tmp_path))
    assert sorted(got) == sorted(expected)
    for name in expected:
        if name.startswith("index/") or name == "training_job_end.ts":
            assert got[name] == expected[name], name
    l2_name = reduction_tensor_name("layer/weight", "l2")
    for name in (n for n in expected if n.startswith("events/")):
        ours = [decode_tensor_event(bytes(p)) for p in iter_records(got[name])]
        theirs = [decode_tensor_event(bytes(p)) for p in iter_records(expected[name])]
        assert len(got[name]) == len(expected[name])
        assert [e.tag for e in ours] == [e.tag for e in theirs]
        for a, b in zip(ours, theirs):
            assert (a.step, a.mode, a.mode_step, a.wall_time) == (b.step, b.mode, b.mode_step, b.wall_time)
            if a.tag == l2_name:
                w = next(e.value for e in ours if e.tag == "layer/weight")
                assert a.value.tobytes() == np.linalg.norm(w.reshape(-1)).reshape(1).tobytes()
            else:
                assert a.value.dtype == b.value.dtype and a.value.shape == b.value.shape
                assert a.value.tobytes() == b.value.tobytes(), (name, a.tag)
        assert sum(e.tag == l2_name for e in theirs) == 1
    # collections: same definitions for the collections the fixture has
    ours_c = json.loads(got["collections/000000000/worker_0_collections.json"])
    theirs_c = json.loads(expected["collections/000000000/worker_0_collections.json"])
    assert ours_c["_meta"] == theirs_c["_meta"] == {"num_workers": 2}
    for name in ("weights", "biases"):
        assert ours_c["collections"][name] == theirs_c["collections"][name], name
    assert ours_c["collections"]["losses"]["tensor_names"] == ["loss"]
    assert ours_c["collections"]["shapes"]["reduction_config"] == theirs_c["collections"]["shapes"]["reduction_config"]
