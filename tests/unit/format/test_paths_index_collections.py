import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdk_ext.exceptions import IndexReaderException
from sdk_ext.format import paths
from sdk_ext.format.collection_file import encode_collections, parse_collections
from sdk_ext.format.index import IndexFile, TensorEntry, encode_index, parse_index
from sdk_ext.format.paths import (
    collections_key,
    event_key,
    index_key,
    parse_collections_key,
    parse_event_key,
    parse_index_key,
    parse_reduction_name,
    reduction_tensor_name,
)
from sdk_ext.modes import ModeKeys


def test_key_layout():
    assert event_key(3, "worker_0") == "events/000000000003/000000000003_worker_0.tfevents"
    assert index_key(1000, "worker_1") == "index/000000001/000000001000_worker_1.json"
    assert collections_key("worker_0") == "collections/000000000/worker_0_collections.json"
    assert event_key(10**13, "w") == f"events/{10**13}/{10**13}_w.tfevents"


def test_keys_parse_back_and_tmp_names_are_ignored():
    assert parse_index_key("index/000000001/000000001000_worker_1.json") == (1000, "worker_1")
    assert parse_index_key("index/000000001/000000001000_worker_1.json.tmp") is None
    assert parse_event_key("events/000000000003/000000000003_worker_0.tfevents") == (3, "worker_0")
    assert parse_collections_key("collections/000000000/worker_7_collections.json") == "worker_7"


def test_double_underscore_in_the_trial_path_does_not_mangle_workers():
    # smdebug turned worker_0 into worker/0 when the path held "__" (deliberate fix)
    assert parse_index_key("my__trial/index/000000000/000000000001_worker_0.json") == (1, "worker_0")


def test_device_worker_names_round_trip():
    worker = "/job:worker/replica:0/task:1/device:GPU:0"
    key = index_key(5, worker)
    assert key.endswith("000000000005__job-worker_replica-0_task-1_device-GPU-0.json")
    assert parse_index_key(key) == (5, worker)


def test_reduction_names():
    assert reduction_tensor_name("dense/weight:0", "l2_norm", abs=True) == "smdebug/reductions/abs_l2/dense/weight"
    assert reduction_tensor_name("gradient/fc.weight", "mean") == "smdebug/reductions/mean/gradient/fc.weight"
    assert parse_reduction_name("smdebug/reductions/abs_max/layer/weight") == ("layer/weight", "max", True)
    assert parse_reduction_name("layer/weight") is None
    with pytest.raises(ValueError, match="unknown reduction"):
        reduction_tensor_name("x", "median")


def test_index_shapes_only_has_two_key_meta():
    idx = IndexFile(ModeKeys.TRAIN, 3, None, (), ())
    assert encode_index(idx) == b'{"meta": {"mode": "TRAIN", "mode_step": 3}, "tensor_payload": [], "shape_payload": []}'


@pytest.mark.parametrize(
    "doc,match",
    [
        (b"", "not valid JSON"),
        (b"{}", "meta section is not present"),
        (b'{"meta": {"mode": "TRAIN", "mode_step": 1}}', "neither tensor_payload"),
        (b'{"meta": {"mode": "TRAINING", "mode_step": 1}, "tensor_payload": []}', "meta.mode"),
        (b'{"meta": {"mode": "TRAIN", "mode_step": 1}, "tensor_payload": [{"tensorname": "a", "start_idx": 0, "length": 5}]}',
         "event_file_name is missing"),
    ],
)
def test_bad_index_raises_index_reader_exception_naming_the_key(doc, match):
    with pytest.raises(IndexReaderException, match=match) as info:
        parse_index(doc, key="index/000000000/000000000001_worker_0.json")
    assert "000000000001_worker_0.json" in str(info.value)


def test_index_round_trip():
    idx = IndexFile(ModeKeys.EVAL, 2, "events/000000000008/000000000008_worker_0.tfevents", (TensorEntry("a", 0, 90),))
    assert parse_index(encode_index(idx)) == idx


def test_collections_parse_rejects_string_booleans_and_unknown_keys():
    with pytest.raises(IndexReaderException, match="JSON boolean"):
        parse_collections(b'{"collections": {"a": {"name": "a", "save_histogram": "true"}}, "_meta": {"num_workers": 1}}')
    with pytest.raises(IndexReaderException, match="unexpected top-level"):
        parse_collections(b'{"collections": {}, "_meta": {"num_workers": 1}, "x": 1}')
    with pytest.raises(IndexReaderException, match="num_workers"):
        parse_collections(b'{"collections": {}}')
    cf = parse_collections(b'{"collections": {}, "_meta": {"num_workers": 2}}')
    assert cf.num_workers == 2 and encode_collections(cf) == b'{"collections": {}, "_meta": {"num_workers": 2}}'


@settings(max_examples=500, deadline=None)
@given(st.one_of(
    st.text(st.sampled_from(list("index/0123456789_.jsonw\n\u00b2\u0663a-:")), max_size=40),
    st.builds(lambda b, s, w, e: f"index/{b}/{s}_{w}{e}", st.text("0123456789\u0663", max_size=4),
              st.text("0123456789\u00b2", max_size=4), st.text("w_/.:-\n0", max_size=6),
              st.sampled_from([".json", ".json.tmp", ".jso", ".json\n"])),
))
def test_index_keys_parse_as_the_key_pattern_says(key: str) -> None:
    # the usual keys take a shortcut past the regex: it must agree with the regex on every key
    match = paths._INDEX_RE.search(key)
    assert parse_index_key(key) == (None if match is None else (int(match[1]), paths.deserialize_worker(match[2])))


_names = st.text(min_size=1, max_size=12)  # any text: quotes, backslashes, control characters, non-ASCII


@settings(max_examples=200)
@given(
    st.sampled_from(list(ModeKeys)),
    st.integers(0, 2**40),
    st.one_of(st.none(), _names),
    st.lists(st.tuples(_names, st.integers(0, 2**40), st.integers(16, 2**40)), max_size=5),
    st.lists(st.tuples(_names, _names, st.lists(st.integers(0, 2**20), max_size=3)), max_size=3),
)
def test_index_documents_are_json_dumps_byte_for_byte(mode, mode_step, event_file, tensors, shapes):
    """The writer builds index documents from cached pieces; they are exactly what smdebug's writer
    (json.dumps with default separators) makes for the same index."""
    from sdk_ext.format.index import ShapeEntry

    idx = IndexFile(mode, mode_step, event_file, tuple(TensorEntry(*t) for t in tensors),
                    tuple(ShapeEntry(n, o, tuple(s)) for n, o, s in shapes))
    meta = {"mode": mode.name, "mode_step": mode_step} | ({} if event_file is None else {"event_file_name": event_file})
    reference = json.dumps({
        "meta": meta,
        "tensor_payload": [{"tensorname": n, "start_idx": s, "length": n_} for n, s, n_ in tensors],
        "shape_payload": [{"tensorname": n, "originalname": o, "shape": s} for n, o, s in shapes],
    }).encode("utf-8")
    assert encode_index(idx) == encode_index(idx) == reference  # twice: the second from the cached pieces
