"""Processes without a rank share an out_dir: one writes (it holds claim.smd's lock), the others save nothing;
a writer that died leaves nothing that stops the next one."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.format.paths import CLAIM_FILE
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.hooks.claim import TrialClaim
from tests.trial_dump import decode_value_json, dump_with_format

HOLD = "import sys, time; from sdk_ext.hooks.claim import TrialClaim; c = TrialClaim(sys.argv[1]); " \
       "print(c.acquire(), flush=True); time.sleep(60)"


def test_a_claim_is_held_by_one_process_at_a_time_and_dies_with_it(tmp_path: Path) -> None:
    from tests.conftest import REPO

    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        claim = TrialClaim(tmp_path)
        assert not claim.acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert (tmp_path / CLAIM_FILE).exists()  # left by the killed process, but not held by anyone
    claim = TrialClaim(tmp_path)
    assert claim.acquire()
    claim.release()
    assert not (tmp_path / CLAIM_FILE).exists()
    claim.release()  # twice is fine


def _train(out: str, value: float) -> None:
    hook = Hook(out, save_config=SaveConfig(save_interval=1))
    for step in range(3):
        with hook.step():
            hook.save_tensor("w", np.full(2, value * 10 + step, dtype=np.float32), collections_to_write="weights")
    hook.close()


def test_of_two_forked_workers_without_a_rank_one_writes(tmp_path: Path) -> None:
    out = str(tmp_path / "trial")
    ctx = multiprocessing.get_context("fork")
    holder = TrialClaim(out)  # as if a first worker were writing: the forked ones must not
    assert holder.acquire()
    procs = [ctx.Process(target=_train, args=(out, v)) for v in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert not (Path(out) / "index").exists()  # neither wrote: the claim was held
    holder.release()
    procs = [ctx.Process(target=_train, args=(out, v)) for v in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    dump = dump_with_format(out)
    assert dump["workers"] == ["worker_0"] and dump["steps"]["GLOBAL"] == [0, 1, 2]
    writers = {float(decode_value_json(dump["tensors"]["w"][str(s)]["worker_0"]["value"])[0]) - s for s in range(3)}
    assert len(writers) == 1 and writers <= {10.0, 20.0}  # every step from the same one of the two workers
    assert not (Path(out) / CLAIM_FILE).exists()  # released at close


def test_a_claim_that_cannot_be_made_does_not_stop_writing(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the trial directory would be: nothing can be created under it
    assert TrialClaim(blocked / "trial").acquire()


def test_a_rank_or_a_distributed_job_never_claims(tmp_path: Path) -> None:
    holder = TrialClaim(tmp_path)
    assert holder.acquire()
    try:
        hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), rank=0, world_size=1)
        with hook.step():
            hook.save_tensor("w", np.ones(2, dtype=np.float32), collections_to_write="weights")
        hook.close()
        assert dump_with_format(tmp_path)["steps"]["GLOBAL"] == [0]
    finally:
        holder.release()


def test_the_loser_says_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    holder = TrialClaim(tmp_path)
    assert holder.acquire()
    try:
        with caplog.at_level(logging.WARNING):
            hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1))
            with hook.step():
                hook.save_tensor("w", np.ones(2, dtype=np.float32), collections_to_write="weights")
            hook.close()
    finally:
        holder.release()
    assert f"(pid {os.getpid()}): another process is writing the trial {tmp_path}" in caplog.text
    assert "initialize torch.distributed" in caplog.text
    assert not (tmp_path / "index").exists()
