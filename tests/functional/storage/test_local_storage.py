"""LocalStorage writers: unique temporary names without a system call each, and directories that
disappear between writes are made again."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from sdk_ext.storage import LocalStorage


def tmp_names(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*.tmp"))


def test_writers_of_one_key_never_share_a_temporary_file(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    writers = []

    def start() -> None:
        for _ in range(50):
            w = storage.open_write("training_job_end.ts")
            w.write(b"")
            writers.append(w)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(tmp_names(tmp_path)) == 200  # one file each, none reopened by another writer
    for w in writers:
        w.commit()
    assert [p.name for p in tmp_path.iterdir()] == ["training_job_end.ts"]


def test_a_forked_child_draws_its_own_prefix(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    storage.open_write("a").write(b"parent")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one writer, then report its temporary name
        try:
            storage.open_write("a").write(b"child")
            names = [n for n in os.listdir(tmp_path) if n.endswith(".tmp") and f".{os.getpid()}-" in n]
            os.write(write, names[0].encode())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    child_name = os.read(read, 1000).decode()
    parent_name = next(n for n in tmp_names(tmp_path) if n != child_name)
    assert child_name.split(".")[1].rsplit("-", 1)[0] != parent_name.split(".")[1].rsplit("-", 1)[0]


def test_directories_removed_between_writes_are_made_again(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "trial")
    storage.write("events/000000000001/a", b"1")
    storage.write("index/000000000/b", b"2")
    shutil.rmtree(tmp_path / "trial" / "events")  # a parent the storage had made
    storage.write("events/000000000002/a", b"3")
    shutil.rmtree(tmp_path / "trial" / "index")  # the very directory of the next key
    storage.write("index/000000000/c", b"4")
    assert storage.read("events/000000000002/a") == b"3" and storage.read("index/000000000/c") == b"4"
