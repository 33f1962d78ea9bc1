"""Start an N-process torch.distributed job on this machine, as torchrun would, with a hard timeout."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def leave_past_last_barrier() -> NoReturn:
    """End a rank that has passed its job's last ``dist.barrier()``, without tearing gloo down.

    torch 2.13's gloo teardown (``destroy_process_group``, or its destructors at exit) aborts a finished
    rank now and then with "terminate called without an active exception" (1 run in 240 here, with the
    barrier before it), which says nothing about the hook; past the barrier there is nothing left to say
    to the other ranks.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_ranks(script: Path | str, args: Sequence[str], *, world: int, timeout: float = 120,
              env: Mapping[str, str] | None = None) -> list[str]:
    """Run ``script args`` as ranks 0..world-1 (gloo on 127.0.0.1); return each rank's output.

    Raises:
        AssertionError: a rank failed or the job ran past ``timeout`` (every rank is then killed).
    """
    base = dict(os.environ if env is None else env)
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world),
                LOCAL_WORLD_SIZE=str(world), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), base.get("PYTHONPATH", "")) if p)
    procs = [subprocess.Popen([sys.executable, str(script), *args], env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    outputs: list[str] = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=timeout)[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        tails = [p.communicate()[0][-2000:] for p in procs]
        raise AssertionError(f"job ran past {timeout} s:\n" + "\n---\n".join(tails)) from None
    for rank, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"rank {rank} exited {p.returncode}:\n{out[-4000:]}"
    return outputs
