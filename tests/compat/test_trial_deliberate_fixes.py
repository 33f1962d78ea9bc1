"""Each place where create_trial answers differently from smdebug 1.0.34 on purpose, one test each.

The test name says what sdk_ext does; the docstring names the smdebug behaviour it fixes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError, MissingCollectionFiles
from sdk_ext.format.events import decode_tensor_event
from sdk_ext.format.index import parse_index
from sdk_ext.format.paths import parse_index_key
from sdk_ext.format.records import read_record
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage, LocalStorage
from sdk_ext.trials import TrialOptions, create_trial, no_refresh
from tests.conftest import SMDEBUG_FIXTURES
from tests.trial_builder import FakeClock, TrialBuilder

FIXTURES = sorted(p for p in SMDEBUG_FIXTURES.iterdir() if (p / "expected.json").is_file()) if SMDEBUG_FIXTURES.is_dir() else []
TRAIN = ModeKeys.TRAIN

DTYPES = ["int8", "int16", "uint16", "uint32", "uint64", "complex64", "complex128", "float16", "bool"]


def dtype_values() -> dict[str, np.ndarray]:
    values = {f"t/{dt}": (np.arange(-3, 3) * 7).astype(dt).reshape(2, 3) for dt in DTYPES}
    values["t/empty"] = np.zeros((0, 4), np.float32)
    return values


def test_a_value_saved_with_its_shape_stays_readable():
    """smdebug: the shape entry replaces the value's location, value() raises TensorUnavailableForStep."""
    cases = 0
    for fixture in FIXTURES:
        out = fixture / "out"
        trial = create_trial(str(out), options=TrialOptions(clock=FakeClock()), timeout=0)
        expected = json.loads((fixture / "expected.json").read_text())["tensors"]
        for path in sorted((out / "index").rglob("*.json")):
            step, worker = parse_index_key(path.relative_to(out).as_posix())  # type: ignore[misc]
            index = parse_index(path.read_bytes())
            shapes = {s.name: s.shape for s in index.shapes}
            for entry in index.tensors:
                if entry.name not in shapes:
                    continue
                smdebug_said = expected[entry.name]["by_global_step"][str(step)]["workers"][worker]["value"]
                assert smdebug_said["error"] == "TensorUnavailableForStep"
                data = (out / index.event_file).read_bytes()  # type: ignore[operator]
                truth = decode_tensor_event(read_record(data, entry.start, expect_length=entry.length)).value
                ours = trial.tensor(entry.name).value(step, worker=worker)
                assert ours.dtype == truth.dtype and np.array_equal(ours, truth) and ours.shape == shapes[entry.name]
                assert trial.tensor(entry.name).reduction_value(step, "max", worker=worker) == truth.max()
                cases += 1
    assert cases >= 20


@pytest.mark.parametrize("fixture", [f for f in FIXTURES if f.name != "b_pytorch_mlp"], ids=lambda p: p.name)
def test_tensor_names_of_a_mode_never_seen_is_empty(fixture):
    """smdebug: tensor_names(mode=ModeKeys.PREDICT) raises KeyError when no PREDICT step was saved."""
    expected = json.loads((fixture / "expected.json").read_text())["tensor_names_by_mode"]["PREDICT"]
    assert expected["error"] == "KeyError"
    trial = create_trial(str(fixture / "out"), options=TrialOptions(clock=FakeClock()), timeout=0)
    assert trial.tensor_names(mode=ModeKeys.PREDICT) == []
    assert trial.tensor_names(mode=TRAIN, step=10**6) == []  # smdebug: KeyError for an unknown mode step too


def write_dtype_trial(root: Path) -> dict[str, np.ndarray]:
    values = dtype_values()
    b = TrialBuilder(LocalStorage(root))
    b.collections()
    b.step(0, mode=TRAIN, tensors=values)
    b.end()
    return values


def test_every_dtype_the_format_holds_is_readable(tmp_path):
    """smdebug: int8 comes back as uint8 (-7 reads 249); int16/uint16/uint32/uint64/complex64 raise
    KeyError; an empty tensor raises SMDebugValueError."""
    values = write_dtype_trial(tmp_path)
    trial = create_trial(tmp_path, timeout=0)
    for name, value in values.items():
        got = trial.tensor(name).value(0)
        assert got.dtype == value.dtype and got.shape == value.shape and np.array_equal(got, value), name
    assert trial.tensor("t/int8").value(0).min() == -21


def test_double_underscore_in_the_path_keeps_worker_names(tmp_path):
    """smdebug: a path containing "__" turns worker_0 into worker/0 in index entries, so
    value(worker="worker_0") raises InvalidWorker while workers() says worker_0."""
    root = tmp_path / "job__2024"
    b = TrialBuilder(LocalStorage(root))
    b.collections(["worker_0", "worker_1"])
    for worker in ("worker_0", "worker_1"):
        b.step(0, worker, tensors={"x": np.array([1.0 if worker == "worker_0" else 2.0])})
    b.end()
    trial = create_trial(root, options=TrialOptions(clock=FakeClock()), timeout=0)
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.tensor("x").workers(0) == ["worker_0", "worker_1"]
    assert trial.tensor("x").value(0, worker="worker_1").tolist() == [2.0]


@pytest.mark.smdebug
def test_smdebug_itself_shows_the_dtype_and_path_bugs_on_the_same_files(tmp_path, smdebug_python):
    """The two tests above describe smdebug correctly: run it on the same files."""
    root = tmp_path / "job__1"
    write_dtype_trial(root)
    script = (
        "import json, sys\n"
        "from smdebug.trials import create_trial\n"
        "t = create_trial(sys.argv[1])\n"
        "out = {}\n"
        "for n in t.tensor_names():\n"
        "    try:\n"
        "        v = t.tensor(n).value(0, worker='worker_0')\n"
        "        out[n] = str(v.dtype)\n"
        "    except Exception as e:\n"
        "        out[n] = type(e).__name__\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [str(smdebug_python), "-c", script, str(root)], capture_output=True, text=True, timeout=120, check=False,
        env={"SMDEBUG_TRAINING_END_DELAY_REFRESH": "0", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    smdebug = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(smdebug.values()) == {"InvalidWorker"}  # "__" in the path: no worker_0 anywhere
    plain = tmp_path / "plain"
    write_dtype_trial(plain)
    done = subprocess.run(
        [str(smdebug_python), "-c", script, str(plain)], capture_output=True, text=True, timeout=120, check=False,
        env={"SMDEBUG_TRAINING_END_DELAY_REFRESH": "0", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    smdebug = json.loads(done.stdout.strip().splitlines()[-1])
    assert smdebug["t/int8"] == "uint8"
    assert {smdebug[f"t/{d}"] for d in ("int16", "uint16", "uint32", "uint64", "complex64")} == {"KeyError"}
    assert smdebug["t/empty"] == "SMDebugValueError"
    assert smdebug["t/float16"] == "float16" and smdebug["t/complex128"] == "complex128"


def test_an_empty_path_raises_instead_of_hanging(tmp_path):
    """smdebug: create_trial on a directory without collections files and without the end marker
    polls every 2 s forever."""
    clock = FakeClock()
    with pytest.raises(MissingCollectionFiles):
        create_trial(tmp_path, options=TrialOptions(clock=clock, collections_timeout=30, poll_interval=2))
    assert clock.slept == pytest.approx(30)


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_no_sleep_at_the_end_of_a_finished_job(fixture):
    """smdebug: the first query on a finished trial sleeps SMDEBUG_TRAINING_END_DELAY_REFRESH (1 s),
    also when a single worker wrote it and the listing after the marker already holds every step, or
    when every worker has written the last step (the two-worker fixtures)."""
    clock = FakeClock()
    trial = create_trial(str(fixture / "out"), options=TrialOptions(clock=clock), timeout=0)
    assert trial.loaded_all_steps and trial.steps()
    assert clock.sleeps == []


def test_tensor_steps_are_complete_by_global_step_and_worker_count():
    """smdebug: Tensor.steps compares a list of workers with num_workers (never equal) and the
    *mode* step with the last complete *global* step, so TRAIN steps 3-5 below count as complete."""
    s = InMemoryStorage()
    b = TrialBuilder(s)
    b.collections(["worker_0", "worker_1"])
    for mode_step in range(6):  # EVAL ran first: TRAIN mode step n is global step 10 + n
        for worker in ("worker_0", "worker_1") if mode_step <= 2 else ("worker_0",):
            b.step(10 + mode_step, worker, mode=TRAIN, mode_step=mode_step, tensors={"w": np.ones(2)})
    trial = create_trial(s, timeout=0)
    assert trial.last_complete_step == 12
    assert trial.steps(TRAIN) == [0, 1, 2]
    assert trial.tensor("w").steps(TRAIN) == [0, 1, 2]  # smdebug: [0, 1, 2, 3, 4, 5]


def test_norms_of_tensors_with_three_or_more_dimensions_are_element_wise():
    """smdebug: reduction_value(step, "l2") of a 3-D tensor raises ValueError (matrix norm undefined)."""
    s = InMemoryStorage()
    b = TrialBuilder(s)
    b.collections()
    conv = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 12
    b.step(0, tensors={"conv": conv})
    t = create_trial(s, timeout=0).tensor("conv")
    assert t.reduction_value(0, "l2") == pytest.approx(np.linalg.norm(conv.reshape(-1)))
    assert t.reduction_value(0, "l1") == pytest.approx(np.abs(conv).sum())


def test_norms_of_a_matrix_are_element_wise_like_the_stored_ones():
    """smdebug: reduction_value(step, "l2") of a 2-D tensor whose norm was not stored is the spectral
    norm (l1: the max column sum), while the PyTorch hook stores the element-wise norm under the same
    name, so one call meant two quantities (fixture c: 0.683 computed vs 0.905 element-wise)."""
    s = InMemoryStorage()
    b = TrialBuilder(s)
    b.collections()
    w = np.array([[3.0, -1.0], [0.0, 4.0]], dtype=np.float32)
    b.step(0, tensors={"fc.weight": w})
    t = create_trial(s, timeout=0).tensor("fc.weight")
    assert t.reduction_value(0, "l2") == pytest.approx(np.sqrt(26.0))  # smdebug: 4.27 (spectral)
    assert t.reduction_value(0, "l1") == pytest.approx(8.0)  # smdebug: 5.0 (max column sum)


def test_wait_for_steps_leaves_dynamic_refresh_as_it_was():
    """smdebug: wait_for_steps runs inside refresh(trial), whose exit sets dynamic_refresh = False
    for good, so later queries never see new steps."""
    s = InMemoryStorage()
    b = TrialBuilder(s)
    b.collections()
    b.step(0, tensors={"x": np.ones(1)})
    trial = create_trial(s, timeout=0)
    trial.wait_for_steps([0])
    assert trial.dynamic_refresh
    b.step(1, tensors={"x": np.ones(1)})
    assert trial.steps() == [0, 1]
    with no_refresh(trial):
        trial.wait_for_steps([1])
        assert not trial.dynamic_refresh


def test_bad_range_steps_is_a_config_error_not_an_assertion():
    """smdebug: assert statements (AssertionError, or nothing under python -O)."""
    s = InMemoryStorage()
    TrialBuilder(s).collections()
    with pytest.raises(ConfigError) as err:
        create_trial(s, range_steps=(10, 2), timeout=0)
    assert isinstance(err.value, ValueError) and "greater than begin" in str(err.value)
