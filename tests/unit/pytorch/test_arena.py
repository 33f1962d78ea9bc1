"""The shared memory through which the ranks of one host put sharded tensors together (sdk_ext.pytorch.arena),
and the transport setting (sdk_ext.pytorch.gather.GatherConfig)."""

from __future__ import annotations

import errno
import gc
import os
import threading
import time
from pathlib import Path

import pytest
import torch

from sdk_ext.pytorch import arena
from sdk_ext.pytorch.gather import GatherConfig, GatherError


def test_two_mappings_of_one_arena_see_each_others_bytes_and_slots_alternate(tmp_path: Path) -> None:
    path = str(tmp_path / "arena")
    leader = arena.create(path, 8192)
    member = arena.attach(path, 8192)
    assert leader is not None and member is not None
    arena.unlink(path)  # both keep their mapping; nothing is left in the directory
    assert not os.path.exists(path)
    a, b = arena.Arena(leader, 8192, (0, 1)), arena.Arena(member, 8192, (0, 1))
    b.slot(1)[:4] = torch.tensor([1, 2, 3, 4], dtype=torch.uint8)
    assert a.slot(1)[:4].tolist() == [1, 2, 3, 4]
    assert a.slot(2)[:4].tolist() == [0, 0, 0, 0]  # the other slot
    assert a.slot(3)[:4].tolist() == [1, 2, 3, 4]  # seq 3 reuses seq 1's slot


def _wake_pipe(tmp_path: Path, name: str) -> tuple[int, int]:
    """A named pipe's (read end, write end), as the gather makes them (read end non-blocking)."""
    path = str(tmp_path / name)
    reader = arena.open_reader(path)
    sender = arena.open_sender(path)
    assert reader is not None and sender is not None
    arena.unlink(path)
    return reader, sender


def _group_of_three(tmp_path: Path) -> tuple[arena.Arena, arena.Arena, arena.Arena]:
    """Ranks 0 and 2 write, rank 1 is a member: each writer wakes the two others."""
    path = str(tmp_path / "arena")
    mapped = arena.create(path, 4096)
    assert mapped is not None
    sides = [arena.Arena(mapped, 4096, (0, 1, 2)) for _ in range(3)]
    pipes = {(w, r): _wake_pipe(tmp_path, f"wake-{w}-{r}") for w in (0, 2) for r in (0, 1, 2) if w != r}
    for rank, side in enumerate(sides):
        side.own_pipes({}, {}, {r: fds[1] for (w, r), fds in pipes.items() if w == rank},
                       {w: fds[0] for (w, r), fds in pipes.items() if r == rank})
    return sides[0], sides[1], sides[2]


def test_a_slot_is_reused_only_once_every_writer_consumed_its_last_round(tmp_path: Path) -> None:
    first, member, last = _group_of_three(tmp_path)
    assert member.wait_free(1, (0, 2), timeout=0) and member.wait_free(2, (0, 2), timeout=0)  # slots start free
    assert not member.wait_free(3, (0, 2), timeout=0.01)  # round 1 not consumed yet
    first.consumed(1, 0)
    assert not member.wait_free(3, (0, 2), timeout=0.01)  # rank 2 still writes round 1
    timer = threading.Timer(0.05, last.consumed, (1, 2))
    timer.start()
    started = time.monotonic()
    assert member.wait_free(3, (0, 2), timeout=5)  # woken when the last writer is done
    assert time.monotonic() - started < 2
    timer.join()
    assert first.wait_free(3, (0, 2), timeout=0)  # the other writer sees the same words


def test_a_waiting_rank_sleeps_until_woken_and_a_writer_that_left_ends_the_wait(tmp_path: Path) -> None:
    first, member, last = _group_of_three(tmp_path)
    for seq in range(1, 40):  # wake-ups the member never waited for pile up harmlessly
        first.consumed(seq, 0)
    timer = threading.Timer(0.3, last.consumed, (1, 2))
    timer.start()
    assert member.wait_free(3, (0, 2), timeout=5)
    timer.join()
    del last, timer  # rank 2's hook, and its ends of the pipes, are gone (as when its process ends)
    gc.collect()
    started = time.monotonic()
    assert not member.wait_free(5, (0, 2), timeout=30)  # rank 2 never consumed round 3
    assert time.monotonic() - started < 5
    assert member.wait_free(3, (0,), timeout=0)


def test_a_shm_that_cannot_hold_the_arena_is_refused_at_setup_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    path = str(tmp_path / "arena")
    with caplog.at_level("INFO", logger="sdk_ext.pytorch.arena"):
        assert arena.create(path, 1 << 20) is None
    assert not os.path.exists(path)
    assert "using gloo" in caplog.text and "--shm-size" in caplog.text


def test_attach_refuses_a_missing_file_or_one_of_another_size(tmp_path: Path) -> None:
    path = str(tmp_path / "arena")
    assert arena.attach(path, 4096) is None  # another host: the leader's file is not here
    assert arena.create(path, 4096) is not None
    assert arena.attach(path, 8192) is None
    assert arena.create(path, 4096) is None  # never two arenas under one name


def test_slot_size_is_the_largest_round_plus_statistics_in_pages() -> None:
    assert arena.slot_bytes_for(raw_total=10_000, largest=6_000, stats_total=100, buffer_bytes=1 << 20) == 12288
    assert arena.slot_bytes_for(raw_total=10 << 20, largest=1 << 20, stats_total=0, buffer_bytes=4 << 20) == 4 << 20
    assert arena.slot_bytes_for(raw_total=10 << 20, largest=6 << 20, stats_total=0, buffer_bytes=4 << 20) == 6 << 20


def test_transport_setting() -> None:
    assert GatherConfig.from_env({}).transport == "auto"
    assert GatherConfig.from_env({"SDK_EXT_GATHER_TRANSPORT": "GLOO"}).transport == "gloo"
    with pytest.raises(GatherError, match=r"SDK_EXT_GATHER_TRANSPORT='nccl': use one of auto, gloo"):
        GatherConfig.from_env({"SDK_EXT_GATHER_TRANSPORT": "nccl"})


def test_presence_bytes_go_through_a_named_pipe_and_a_gone_sender_is_told(tmp_path: Path) -> None:
    path = str(tmp_path / "arena")
    mapped = arena.create(path, 4096)
    assert mapped is not None
    writer_side, member_side = arena.Arena(mapped, 4096, (0, 1)), arena.Arena(mapped, 4096, (0, 1))
    pipe = str(tmp_path / "pipe-1-0")
    reader = arena.open_reader(pipe)
    sender = arena.open_sender(pipe)
    assert reader is not None and sender is not None
    arena.unlink(pipe)  # both ends stay open
    writer_side.own_pipes({}, {1: reader})
    member_side.own_pipes({0: sender}, {})
    member_side.tell(0, bytes([1, 0, 1]))
    member_side.tell(0, bytes([1]))
    assert writer_side.hear(1, 3, timeout=1) == bytes([1, 0, 1])  # rounds stay apart, in order
    assert writer_side.hear(1, 1, timeout=1) == bytes([1])
    with pytest.raises(arena.PeerLeft, match=r"rank 1 sent nothing in 0.05 s"):
        writer_side.hear(1, 1, timeout=0.05)
    del member_side  # the member's hook, and with it its end of the pipe, is gone (as when its process ends)
    gc.collect()
    with pytest.raises(arena.PeerLeft, match=r"rank 1 left"):
        writer_side.hear(1, 1, timeout=5)


def test_a_sender_finds_no_pipe_on_another_host(tmp_path: Path) -> None:
    assert arena.open_sender(str(tmp_path / "nobody-made-it")) is None
