"""Index files -> StepFiles: the fast parse agrees with the validating one and rejects what it rejects."""

from __future__ import annotations

import json

import pytest

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.modes import ModeKeys
from sdk_ext.trials.index_cache import StepFileParser

EVENT = "events/000000000003/000000000003_worker_0.tfevents"


def doc(payload, shapes=(), meta=None) -> bytes:
    meta = meta or {"mode": "TRAIN", "mode_step": 1, "event_file_name": EVENT}
    return json.dumps({"meta": meta, "tensor_payload": list(payload), "shape_payload": list(shapes)}).encode()


def entry(name, start, length):
    return {"tensorname": name, "start_idx": start, "length": length}


def test_entries_reductions_shapes_and_last_duplicate_wins():
    data = doc(
        [entry("w", 0, 100), entry("smdebug/reductions/abs_l2/w", 100, 50), entry("loss", 150, 60),
         entry("loss", 210, 60), entry("smdebug/reductions/mean/only_red", 270, 40)],
        [{"tensorname": "w", "originalname": "w:0", "shape": [3, 4]}],
    )
    sf = StepFileParser().parse(data, key="index/000000000/000000000003_worker_0.json", step=3, worker="worker_0")
    assert (sf.step, sf.worker, sf.mode, sf.mode_step, sf.event_key) == (3, "worker_0", ModeKeys.TRAIN, 1, EVENT)
    assert sf.raw == {"w": (0, 100), "loss": (210, 60)}
    assert sf.reductions == {"w": {("l2", True): (100, 50)}, "only_red": {("mean", False): (270, 40)}}
    assert sf.shapes == {"w": (3, 4)} and sf.names == {"w", "loss", "only_red"} and sf.event_size == 310


def test_step_files_with_the_same_names_share_one_name_set():
    parser = StepFileParser()
    a = parser.parse(doc([entry("x", 0, 10)]), key="a", step=1, worker="w")
    b = parser.parse(doc([entry("x", 5, 10)]), key="b", step=2, worker="w")
    assert a.names is b.names


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (doc([entry("x", True, 10)]), "start_idx must be a non-negative integer"),
        (doc([entry("x", 0, -1)]), "length must be a non-negative integer"),
        (doc([entry("x", 1.5, 10)]), "start_idx must be a non-negative integer"),
        (doc([entry(7, 0, 10)]), "bad tensor_payload entry"),
        (doc([entry("x", 0, 10)], meta={"mode": "TRAIN", "mode_step": 1}), "event_file_name is missing"),
        (doc([entry("x", 0, 10)], meta={"mode": "TRAINING", "mode_step": 1, "event_file_name": EVENT}), "meta.mode"),
        (doc([], [{"tensorname": "x", "shape": [2, -1]}]), "shape dimension"),
        (b'{"meta": {"mode": "TRAIN", "mode_step": 0}}', "neither tensor_payload nor shape_payload"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_malformed_documents_raise_naming_the_key(data, match):
    with pytest.raises(IndexReaderException, match=rf"^index/x\.json: .*{match}"):
        StepFileParser().parse(data, key="index/x.json", step=0, worker="worker_0")


def test_mode_names_with_blanks_are_accepted_as_smdebug_does():
    sf = StepFileParser().parse(doc([entry("x", 0, 10)], meta={"mode": " EVAL ", "mode_step": 2, "event_file_name": EVENT}),
                                key="k", step=5, worker="w")
    assert sf.mode is ModeKeys.EVAL


def test_an_event_file_name_given_as_a_full_path_is_taken_relative_to_the_trial():
    for given in ("/opt/ml/output/tensors/" + EVENT, "s3://bucket/job/debug-output/" + EVENT, EVENT):
        sf = StepFileParser().parse(doc([entry("x", 0, 10)], meta={"mode": "GLOBAL", "mode_step": 3,
                                                                     "event_file_name": given}),
                                    key="k", step=3, worker="worker_0")
        assert sf.event_key == EVENT
