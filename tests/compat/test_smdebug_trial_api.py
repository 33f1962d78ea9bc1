"""smdebug analysis code runs unchanged but for the import prefix (docs/FORMAT.md#reader-semantics).

Each test is written the way an smdebug analysis or rule uses the trial API; where real smdebug
1.0.34 is at hand, the same calls on the same trial must give the same answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.format.collection_file import CollectionSpec
from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.storage import LocalStorage
from sdk_ext.trials import LocalTrial, S3Trial, Trial, create_trial, no_refresh
from tests.moto_s3 import S3Env
from tests.trial_builder import TrialBuilder

TRAIN, EVAL = ModeKeys.TRAIN, ModeKeys.EVAL


def _write(root: Path, steps: range, *, workers: tuple[str, ...] = ("worker_0",), end: bool = True,
           prefix: str = "foo") -> TrialBuilder:
    b = TrialBuilder(LocalStorage(root))
    b.collections(workers, specs={"default": CollectionSpec(name="default", include_regex=(".*",))})
    for step in steps:
        for worker in workers:
            b.step(step, worker, mode=TRAIN, mode_step=step,
                   tensors={f"{prefix}_{i}": np.full((2,), step, np.float32) for i in range(3)})
    if end:
        b.end()
    return b


# --- 7. no_refresh yields the trials ------------------------------------------------------------


def test_no_refresh_yields_the_list_it_was_given(tmp_path: Path) -> None:
    _write(tmp_path, range(4), end=False)
    trial = create_trial(str(tmp_path))
    _write(tmp_path, range(4, 6), end=False)
    with no_refresh([trial]) as [t]:  # smdebug's pattern in its own tests
        assert t is trial
        assert t.steps() == [0, 1, 2, 3]  # steps 4 and 5 are on disk, but the block does not refresh
    assert trial.steps() == [0, 1, 2, 3, 4, 5]


def test_no_refresh_of_one_trial_yields_that_trial(tmp_path: Path) -> None:
    _write(tmp_path, range(2))
    trial = create_trial(str(tmp_path))
    with no_refresh(trial) as t:
        assert t is trial and t.dynamic_refresh is False
    assert trial.dynamic_refresh is True


# --- 8. an analysis can edit a collection --------------------------------------------------------


def test_collection_include_and_add_tensor_name_change_what_the_trial_selects(tmp_path: Path) -> None:
    _write(tmp_path, range(3))
    _write(tmp_path, range(3, 5), prefix="boo")
    trial = create_trial(str(tmp_path))
    trial.collection("test").include("foo")  # a collection the trial does not define: created, kept
    trial.collection("test").add_tensor_name("boo_1")
    trial.collection("test").add_tensor_name("boo_17")  # never saved: held, never listed
    assert trial.tensor_names(collection="test") == ["boo_1", "foo_0", "foo_1", "foo_2"]
    assert trial.tensor_names(collection=trial.collection("test")) == ["boo_1", "foo_0", "foo_1", "foo_2"]
    assert trial.collection("test").include_regex == ["foo"]
    assert trial.collection("test").tensor_names == {"boo_1", "boo_17"}
    with pytest.raises(ValueError):  # smdebug: regex and collection together are refused
        trial.tensor_names(collection=trial.collection("test"), regex="a")


def test_collection_include_of_a_bad_regex_says_which_and_changes_nothing(tmp_path: Path) -> None:
    _write(tmp_path, range(1))
    trial = create_trial(str(tmp_path))
    with pytest.raises(ConfigError, match=r"include\('\(unclosed'\).*re.escape"):
        trial.collection("default").include(["foo", "(unclosed"])
    assert trial.collection("default").include_regex == [".*"]


def test_asking_for_tensor_names_of_an_unknown_collection_does_not_create_it(tmp_path: Path) -> None:
    _write(tmp_path, range(1))
    trial = create_trial(str(tmp_path))
    assert trial.tensor_names(collection="nope") == []
    assert "nope" not in trial.collections()


# --- 9. last_index_token, last_complete_step; LocalTrial / S3Trial -------------------------------


def test_last_complete_step_and_last_index_token_name_the_last_complete_step(tmp_path: Path) -> None:
    root = tmp_path / "trial"
    _write(root, range(0, 31, 10), end=False)
    trial = create_trial(str(root))
    assert trial.last_complete_step == 30
    assert trial.last_index_token == os.path.join(str(root), "index/000000000/000000000030_worker_0.json")
    assert trial.has_passed_step(30) is StepState.AVAILABLE


def test_last_index_token_waits_for_every_worker(tmp_path: Path) -> None:
    b = _write(tmp_path, range(2), workers=("worker_0", "worker_1"), end=False)
    b.step(2, "worker_0", mode=TRAIN, mode_step=2, tensors={"foo_0": np.zeros(2, np.float32)})
    trial = create_trial(str(tmp_path))
    assert trial.last_complete_step == 1  # step 2 has one of two workers
    assert trial.last_index_token == os.path.join(str(tmp_path), "index/000000000/000000000001_worker_1.json")


def test_last_index_token_is_none_before_any_step(tmp_path: Path) -> None:
    _write(tmp_path, range(0), end=False)
    trial = create_trial(str(tmp_path))
    assert trial.last_complete_step == -1 and trial.last_index_token is None


def test_local_trial_as_smdebug_builds_it(tmp_path: Path) -> None:
    _write(tmp_path / "t", range(3))
    trial = LocalTrial(name="t", dirname=str(tmp_path / "t"))
    assert isinstance(trial, Trial) and trial.name == "t"
    assert trial.steps() == [0, 1, 2] and len(trial.tensor_names()) == 3
    assert trial.last_index_token == os.path.join(str(tmp_path / "t"), "index/000000000/000000000002_worker_0.json")


def test_s3_trial_as_smdebug_builds_it(tmp_path: Path, s3: S3Env) -> None:
    _write(tmp_path, range(3))
    for path in tmp_path.rglob("*"):
        if path.is_file():
            s3.direct.upload_file(str(path), s3.bucket, f"jobs/x/debug-output/{path.relative_to(tmp_path).as_posix()}")
    trial = S3Trial(name="x", bucket_name=s3.bucket, prefix_name="jobs/x/debug-output/")
    assert trial.path == f"s3://{s3.bucket}/jobs/x/debug-output"
    assert trial.steps() == [0, 1, 2] and len(trial.tensor_names()) == 3
    # smdebug's token for S3 is the object key, without the bucket
    assert trial.last_index_token == "jobs/x/debug-output/index/000000000/000000000002_worker_0.json"


# --- against real smdebug ---------------------------------------------------------------------------

_SMDEBUG_SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ["SMDEBUG_TRAINING_END_DELAY_REFRESH"] = "0"
    from smdebug.analysis.utils import no_refresh
    from smdebug.trials import create_trial
    trial = create_trial(sys.argv[1])
    trial.collection("picked").include("foo_[01]")
    trial.collection("picked").add_tensor_name("boo_2")
    with no_refresh([trial]) as [t]:
        same = t is trial
    out = {"last_index_token": trial.last_index_token, "last_complete_step": trial.last_complete_step,
           "picked": sorted(trial.tensor_names(collection="picked")), "no_refresh_yields_trial": same}
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
""")


def test_same_answers_as_real_smdebug(tmp_path: Path, smdebug_python: Path) -> None:
    root = tmp_path / "trial"
    _write(root, range(5), workers=("worker_0", "worker_1"), end=False)
    _write(root, range(5, 7), workers=("worker_0", "worker_1"), end=False, prefix="boo")
    script, out = tmp_path / "read.py", tmp_path / "out.json"
    script.write_text(_SMDEBUG_SCRIPT)
    subprocess.run([str(smdebug_python), str(script), str(root), str(out)], check=True, capture_output=True,
                   timeout=300)
    expected = json.loads(out.read_text())

    trial = create_trial(str(root))
    trial.collection("picked").include("foo_[01]")
    trial.collection("picked").add_tensor_name("boo_2")
    with no_refresh([trial]) as [t]:
        same = t is trial
    got = {"last_index_token": trial.last_index_token, "last_complete_step": trial.last_complete_step,
           "picked": sorted(trial.tensor_names(collection="picked")), "no_refresh_yields_trial": same}
    assert got == expected


def test_a_bad_range_steps_is_still_the_assertion_error_smdebug_raised(tmp_path: Path) -> None:
    _write(tmp_path, range(2))
    with pytest.raises(AssertionError, match="range_steps"):
        create_trial(str(tmp_path), range_steps=(5, 1))
    with pytest.raises(ConfigError):
        create_trial(str(tmp_path), range_steps=(5, 1))
