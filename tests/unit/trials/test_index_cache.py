"""Index files -> StepFiles: the fast parse agrees with the validating one and rejects what it rejects."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.modes import ModeKeys
from sdk_ext.trials.index.trial_index import StepFileParser

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
    a = parser.parse(doc([entry("x", 0, 10)]), key="a", step=3, worker="worker_0")
    b = parser.parse(doc([entry("x", 5, 10)]), key="b", step=3, worker="worker_0")
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
                                key="k", step=3, worker="worker_0")
    assert sf.mode is ModeKeys.EVAL


def test_an_event_file_name_given_as_a_full_path_is_taken_relative_to_the_trial():
    for path in ("/opt/ml/output/tensors/" + EVENT, "s3://bucket/job/debug-output/" + EVENT, EVENT):
        sf = StepFileParser().parse(doc([entry("x", 0, 10)], meta={"mode": "GLOBAL", "mode_step": 3,
                                                                     "event_file_name": path}),
                                    key="k", step=3, worker="worker_0")
        assert sf.event_key == EVENT


def fields(sf):
    return (sf.step, sf.worker, sf.mode, sf.mode_step, sf.event_key, sf.event_size, sf.raw, sf.reductions,
            sf.shapes, sf.names)


def test_documents_that_differ_only_in_meta_share_one_parse_of_the_rest():
    parser = StepFileParser()
    payload = [entry("w", 0, 100), entry("smdebug/reductions/mean/w", 100, 50)]
    shapes = [{"tensorname": "w", "originalname": "w", "shape": [3, 4]}]
    a = parser.parse(doc(payload, shapes), key="a", step=3, worker="worker_0")
    other = "events/000000000009/000000000009_worker_1.tfevents"
    b = parser.parse(doc(payload, shapes, meta={"mode": "EVAL", "mode_step": 0, "event_file_name": "/x/" + other}),
                     key="b", step=9, worker="worker_1")
    assert (b.mode, b.mode_step, b.event_key, b.step, b.worker) == (ModeKeys.EVAL, 0, other, 9, "worker_1")
    assert b.raw is a.raw and b.reductions is a.reductions and b.shapes is a.shapes and b.names is a.names
    assert fields(b)[5:] == fields(StepFileParser().parse(doc(payload, shapes), key="c", step=3, worker="worker_0"))[5:]


def test_a_tail_of_the_same_length_as_the_last_one_is_parsed_as_itself():
    # the parser compares each tail with the one before (step after step they repeat): one letter apart is not it
    parser = StepFileParser()
    tails = [[entry("w", 0, 100)], [entry("b", 0, 100)], [entry("w", 0, 100)], [entry("w", 0, 101)]]
    got = [parser.parse(doc(p), key=f"k{k}", step=3, worker="worker_0") for k, p in enumerate(tails)]
    assert [(sorted(sf.names), sf.raw) for sf in got] == [
        (["w"], {"w": (0, 100)}), (["b"], {"b": (0, 100)}), (["w"], {"w": (0, 100)}), (["w"], {"w": (0, 101)})]
    assert got[2].raw is got[0].raw  # the memo still serves the first tail


def test_a_second_meta_after_the_payload_wins_as_in_json_and_is_never_taken_from_the_first():
    tail = ', "tensor_payload": [{"tensorname": "x", "start_idx": 0, "length": 10}], "meta": {"mode": "EVAL", ' \
           f'"mode_step": 4, "event_file_name": "{EVENT}"}}}}'
    parser = StepFileParser()
    for mode, mode_step in (("EVAL", 4), ("TRAIN", 1)):  # the first one's two metas agree
        data = f'{{"meta": {{"mode": "{mode}", "mode_step": {mode_step}, "event_file_name": "{EVENT}"}}' + tail
        sf = parser.parse(data.encode(), key="k", step=3, worker="worker_0")
        assert (sf.mode, sf.mode_step) == (ModeKeys.EVAL, 4)


metas = st.fixed_dictionaries({
    "mode": st.sampled_from(["TRAIN", "EVAL", "GLOBAL", " EVAL ", "PREDICT", "TRAINING", "train"]),
    "mode_step": st.one_of(st.integers(0, 10**20), st.just(-1), st.just(True), st.just(1.5)),
    "event_file_name": st.sampled_from([EVENT, "/abs/" + EVENT, "events/x\"y.tfevents", "événement", None]),
})
payloads = st.lists(st.builds(entry, st.sampled_from(["w", "b", "smdebug/reductions/mean/w"]),
                              st.integers(0, 300), st.integers(0, 300)), max_size=3)


@settings(max_examples=300, deadline=None)
@given(docs=st.lists(st.tuples(payloads, metas), min_size=1, max_size=6))
def test_reusing_parses_gives_what_a_fresh_parse_of_each_document_gives(docs):
    shared = StepFileParser()
    for k, (payload, meta) in enumerate(docs):
        data = json.dumps({"meta": {m: v for m, v in meta.items() if v is not None}, "tensor_payload": payload,
                           "shape_payload": []}).encode()
        step = 3 if k % 2 else k  # EVENT is step 3's: others are refused, alike
        fresh = outcome(lambda data=data, s=step: StepFileParser().parse(data, key="k", step=s, worker="worker_0"))
        reused = outcome(lambda data=data, s=step: shared.parse(data, key="k", step=s, worker="worker_0"))
        assert reused == fresh


def outcome(call):
    try:
        return fields(call())
    except IndexReaderException as err:
        return str(err)
