"""Shared memory through which the ranks of one host put a sharded tensor together (see gather.py).

One *arena* per shard group whose ranks all run on one host: a file in ``/dev/shm``, mapped by every
rank of the group and unlinked as soon as they all have it (so nothing is left behind, even when a
process is killed). It holds a control block, then two *slots*. A round of a collection uses slot
``seq % 2``: every member copies its piece straight into its place in the whole tensor there, and
the writers write the whole tensor from the slot, without another copy. Two slots let a member
start the next round while a writer still writes the previous one.

Reuse of a slot is ordered through the control block: after writing round ``seq``, each writer
stores ``seq`` in its word (``consumed[position in the group]``), then writes a wake-up byte into a
named pipe to each other rank of the group; a rank waits until every writer of a round has consumed
round ``seq - 2`` before it copies into that slot, asleep in ``poll`` on those pipes while one has
not (the word is the truth, a byte only says "look again": one syscall per writer and round, where
polling the word with growing sleeps cost a member about 0.1 ms of CPU per round). That a member's pieces
of a round are in place is told by the presence bytes (one per tensor) it then writes into a named
pipe to each writer, made by the writer with the arena and unlinked with it: the pipe's locks order
the copy before the writer's read on any CPU, a closed end says the other process ended, and no
thread is woken but the writer's. (The hook's gloo group took several thread hops per message: about
1 ms of CPU per step at 2 ranks, for these few bytes.)

The space is reserved when the file is made (``posix_fallocate``), so a ``/dev/shm`` too small for
it (Docker's default is 64 MiB) is found when the arena is made, and the group uses gloo for everything instead;
touching a page of it can never fault later.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import select
import time
import weakref
from typing import Any

import numpy as np
import torch

logger = logging.getLogger(__name__)

SHM_DIR = "/dev/shm"
_CONTROL = 4096  # bytes before the first slot; the words of the control block come first
_PAGE = 4096


def slot_bytes_for(raw_total: int, largest: int, stats_total: int, buffer_bytes: int) -> int:
    """A slot's size: the largest round a collection can make (``buffer_bytes`` of whole tensors, or
    one tensor when larger), plus every tensor's partial statistics, in whole pages."""
    need = max(min(buffer_bytes, raw_total), largest) + stats_total
    return (need + _PAGE - 1) // _PAGE * _PAGE


def arena_path(token: str, leader: int) -> str:
    return os.path.join(SHM_DIR, f"sdk_ext-gather-{token}-{leader}")


def pipe_path(token: str, leader: int, sender: int, receiver: int, kind: str = "tell") -> str:
    """A named pipe of the group led by ``leader``: "tell" carries presence bytes from a member to a
    writer, "wake" wake-up bytes from a writer to another rank."""
    return os.path.join(SHM_DIR, f"sdk_ext-gather-{token}-{leader}-{kind}-{sender}-{receiver}")


def open_reader(path: str) -> int | None:
    """Make a named pipe at ``path`` and open its read end (a writer of the group); None if impossible."""
    try:
        os.mkfifo(path, 0o600)
    except OSError as err:
        logger.info("sharded tensors: cannot make %s (%s); using gloo", path, err)
        return None
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # does not wait for the sender to open its end
    except OSError:
        unlink(path)
        return None


def open_sender(path: str) -> int | None:
    """Open the write end of a named pipe a writer made (a member of the group); None if not there."""
    try:
        return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None


class PeerLeft(Exception):
    """The other end of a pipe is gone (its process ended) or did not answer in time."""


class Arena:
    """One group's mapped arena (see the module doc). ``positions`` maps a global rank to its word."""

    def __init__(self, mapped: mmap.mmap, slot_bytes: int, group: tuple[int, ...]) -> None:
        self._mapped = mapped
        self.slot_bytes = slot_bytes
        self.positions = {rank: i for i, rank in enumerate(group)}
        self._bytes = torch.frombuffer(mapped, dtype=torch.uint8)
        self._consumed: np.ndarray[Any, np.dtype[np.uint64]] = np.frombuffer(mapped, dtype=np.uint64,
                                                                             count=len(group))
        self._seq = 0  # rounds this rank has started in this group
        self.senders: dict[int, int] = {}  # writer -> write end of the pipe to it
        self.readers: dict[int, int] = {}  # member -> read end of the pipe from it
        self.wakers: dict[int, int] = {}  # rank -> write end of the wake-up pipe to it (a writer)
        self.wakes: dict[int, int] = {}  # writer -> read end of its wake-up pipe to this rank

    def own_pipes(self, senders: dict[int, int], readers: dict[int, int], wakers: dict[int, int] | None = None,
                  wakes: dict[int, int] | None = None) -> None:
        """Take the pipes of this group (closed with the arena)."""
        self.senders, self.readers = dict(senders), dict(readers)
        self.wakers, self.wakes = dict(wakers or {}), dict(wakes or {})
        for fd in (*self.senders.values(), *self.readers.values(), *self.wakers.values(), *self.wakes.values()):
            weakref.finalize(self, _close, fd)

    def tell(self, writer: int, header: bytes) -> None:
        """Send ``writer`` this round's presence bytes (after the pieces are in the slot: the pipe
        orders the copy before the writer's read on any CPU)."""
        try:
            sent = os.write(self.senders[writer], header)
        except BlockingIOError:
            sent = 0  # never with two slots: at most two rounds of headers wait in the pipe
        except BrokenPipeError as err:
            raise PeerLeft(f"rank {writer} left (its end of the pipe is closed)") from err
        if sent != len(header):
            raise PeerLeft(f"rank {writer} is not reading")

    def hear(self, member: int, count: int, timeout: float) -> bytes:
        """This round's ``count`` presence bytes from ``member``, waiting at most ``timeout`` seconds."""
        fd, got, deadline, poller = self.readers[member], b"", time.monotonic() + timeout, None
        while len(got) < count:
            try:
                chunk = os.read(fd, count - len(got))
            except BlockingIOError:
                if poller is None:  # not there yet (usually it is: the member copied while this rank ran)
                    poller = select.poll()
                    poller.register(fd, select.POLLIN)
                left = deadline - time.monotonic()
                if left <= 0 or not poller.poll(left * 1000):
                    raise PeerLeft(f"rank {member} sent nothing in {timeout} s (did its hook stop?)") from None
                continue
            if not chunk:
                raise PeerLeft(f"rank {member} left (its end of the pipe is closed)")
            got += chunk
        return got

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def slot(self, seq: int) -> torch.Tensor:
        start = _CONTROL + (seq % 2) * self.slot_bytes
        return self._bytes[start : start + self.slot_bytes]

    def consumed(self, seq: int, rank: int) -> None:
        """``rank`` has written everything of round ``seq``: its slot may be filled again. The other
        ranks are woken after the word is stored (a full pipe already holds a wake-up; a closed one
        belongs to a rank that left, which its own writers find out)."""
        self._consumed[self.positions[rank]] = seq
        for fd in self.wakers.values():
            with contextlib.suppress(BlockingIOError, BrokenPipeError):
                os.write(fd, b"\0")

    def wait_free(self, seq: int, writers: tuple[int, ...], timeout: float) -> bool:
        """Wait until every writer has consumed round ``seq - 2`` (the last user of ``seq``'s slot).
        False if one has not within ``timeout`` seconds."""
        need = seq - 2
        late = [r for r in writers if int(self._consumed[self.positions[r]]) < need]
        if not late:
            return True
        deadline = time.monotonic() + timeout
        poller, ranks = select.poll(), {self.wakes[r]: r for r in late}
        for fd in ranks:
            poller.register(fd, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            gone: set[int] = set()
            for fd, _ in poller.poll(left * 1000):
                try:
                    if not os.read(fd, 4096):  # the wake-ups so far: the words say what happened
                        gone.add(ranks[fd])  # its end is closed: that writer left
                        poller.unregister(fd)
                except BlockingIOError:
                    pass
            late = [r for r in late if int(self._consumed[self.positions[r]]) < need]
            if not late:
                return True
            if gone.intersection(late):  # a writer left without consuming the round
                return False


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def create(path: str, slot_bytes: int) -> mmap.mmap | None:
    """Make and map a new arena file of two slots (the leader); None if this host cannot have it."""
    size = _CONTROL + 2 * slot_bytes
    if not hasattr(os, "posix_fallocate"):  # a system without it (macOS) has no /dev/shm either
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as err:
        logger.info("sharded tensors: no shared memory at %s (%s); using gloo", path, err)
        return None
    try:
        os.posix_fallocate(fd, 0, size)  # reserve it now: a full /dev/shm fails here, not with SIGBUS later
        return mmap.mmap(fd, size)
    except OSError as err:
        logger.info("sharded tensors: cannot reserve %d bytes at %s (%s); using gloo (a larger /dev/shm, "
                    "e.g. docker run --shm-size, lets ranks of one host share their pieces)", size, path, err)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    finally:
        os.close(fd)


def attach(path: str, slot_bytes: int) -> mmap.mmap | None:
    """Map an arena file the leader made; None if it is not there (another host, another /dev/shm)."""
    size = _CONTROL + 2 * slot_bytes
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size != size:
            return None
        return mmap.mmap(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


__all__ = ["SHM_DIR", "Arena", "PeerLeft", "arena_path", "attach", "create", "open_reader", "open_sender",
           "pipe_path", "slot_bytes_for", "unlink"]
