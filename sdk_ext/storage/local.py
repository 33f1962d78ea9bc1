"""Storage on a local directory.

Writes go to ``<key>.<pid>-<random>-<n>.tmp`` and are renamed into place on commit, so a reader (or a crash)
never turns a half-written file into data; listings skip ``.tmp`` names.

A writer buffers up to :data:`WRITE_BUFFER` bytes, so the small records of a training step reach the
disk in one or two ``write`` calls (each call releases the GIL, and a training thread gets it back
only when other threads let go). Directories known to exist are not looked up again.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import itertools
import mmap
import os
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import IO

from sdk_ext.exceptions import StorageAccessDenied, StorageError, StorageNotFound
from sdk_ext.storage.base import Buffer, ReadRequest
from sdk_ext.storage.capabilities import Capabilities, Writes

TMP_SUFFIX = ".tmp"
_SLASH = os.sep == "/" and os.altsep is None

WRITE_BUFFER = 256 * 1024
# Reads use os.open and pread, not open(): a trial is many small files, each costing its system calls, and a
# file object makes about twice as many as reading needs (isatty, lseek, an fstat per read...).
_PREAD = hasattr(os, "pread") and hasattr(os, "preadv")
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_MADE_DIRS_LIMIT = 65536


def _pread(fd: int, start: int, length: int | None) -> bytes:
    """``length`` bytes of ``fd`` from ``start`` (fewer at its end), or every byte to its end (None)."""
    # to the end: the size now plus one, so that a file that grew since shows it; then until a read is empty
    ask = length if length is not None else max(os.fstat(fd).st_size - start, 0) + 1
    parts: builtins.list[bytes] = []
    got = 0
    while length is None or got < length:
        data = os.pread(fd, ask if length is None else length - got, start + got)
        if not data:
            break
        parts.append(data)
        got += len(data)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class _TmpNames:
    """Temporary names unique across writers, threads and processes: ``{pid}-{random}-{counter}``
    (the random part is drawn once per process, so no system call per file; two processes never
    share it, even when they have the same pid in different containers)."""

    def __init__(self) -> None:
        self._pid = -1
        self._prefix = ""
        self._counter = itertools.count()
        self._lock = threading.Lock()  # guards _pid and _prefix

    def next(self) -> str:
        pid = os.getpid()
        if pid != self._pid:  # first use, or a forked child
            with self._lock:
                if pid != self._pid:
                    self._prefix = f"{pid}-{secrets.token_hex(4)}-"
                    self._pid = pid
        return f"{self._prefix}{next(self._counter)}"


_TMP_NAMES = _TmpNames()


def _translate(err: OSError, what: str) -> StorageError:
    if isinstance(err, FileNotFoundError):
        return StorageNotFound(f"{what}: no such file or directory")
    if isinstance(err, PermissionError):
        return StorageAccessDenied(f"{what}: permission denied; check the directory's owner and mode")
    return StorageError(f"{what}: {err.strerror or err}")


class _LocalWriter:
    """Writes ``path.tmp``; ``commit`` renames it to ``path``."""

    def __init__(self, path: str, made_dirs: set[str] | None = None) -> None:
        self._path = path
        # unique per writer: two processes may commit the same key (every worker writes the end marker)
        self._tmp = f"{path}.{_TMP_NAMES.next()}{TMP_SUFFIX}"
        self._file: IO[bytes] | None = None
        self._made_dirs = made_dirs if made_dirs is not None else set()

    def _open(self) -> IO[bytes]:
        if self._file is None:
            directory = os.path.dirname(self._path)
            self._ensure_dir(directory)
            try:
                self._file = open(self._tmp, "wb", buffering=WRITE_BUFFER)  # noqa: SIM115 - open until commit/abort
            except FileNotFoundError:  # the directory was removed since it was made
                self._made_dirs.discard(directory)
                self._ensure_dir(directory)
                self._file = open(self._tmp, "wb", buffering=WRITE_BUFFER)  # noqa: SIM115
        return self._file

    def _ensure_dir(self, directory: str) -> None:
        made = self._made_dirs
        if directory in made:
            return
        parent = os.path.dirname(directory)
        if parent in made:  # one mkdir (a training step's own directory under events/)
            try:
                os.mkdir(directory)
            except FileExistsError:
                pass
            except FileNotFoundError:  # the parent was removed since
                made.discard(parent)
                os.makedirs(directory, exist_ok=True)
        else:
            os.makedirs(directory, exist_ok=True)
            made.add(parent)
        if len(made) >= _MADE_DIRS_LIMIT:
            made.clear()
        made.add(directory)

    def write(self, data: Buffer) -> None:
        try:
            self._open().write(data)
        except OSError as err:
            raise _translate(err, f"writing {self._tmp}") from err

    def commit(self) -> None:
        try:
            self._open().close()
            os.replace(self._tmp, self._path)
        except OSError as err:
            raise _translate(err, f"committing {self._path}") from err
        finally:
            self._file = None

    def abort(self) -> None:
        try:
            if self._file is not None:
                file, self._file = self._file, None
                with contextlib.suppress(OSError):  # flushing what is buffered may fail (a full disk): dropped anyway
                    file.close()
        finally:
            try:
                os.remove(self._tmp)
            except FileNotFoundError:
                pass


class LocalStorage:
    """A trial root on local disk. The constructor touches nothing."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.path.expanduser(os.fspath(root)))
        self._made_dirs: set[str] = set()  # directories this storage created or found (set ops are atomic)

    def __repr__(self) -> str:
        return f"LocalStorage({self.root!r})"

    @property
    def uri(self) -> str:
        return self.root

    def path(self, key: str) -> str:
        """The filesystem path of ``key``; a key with a ``..`` segment is refused (it stays under the root)."""
        if not key:
            return self.root
        if ".." in key and ".." in key.replace("\\", "/").split("/"):
            raise StorageError(f"{key!r}: a key with a '..' segment would leave the storage root {self.root}")
        if _SLASH:  # the key is already a path relative to the root (a string join: ~10x os.path.join)
            return f"{self.root}/{key}"
        return os.path.join(self.root, *key.split("/"))

    def list(self, prefix: str, *, start_after: str = "") -> Iterator[str]:
        # Walk only the directory that contains the prefix; keys come out sorted.
        base, _, _ = prefix.rpartition("/")
        keys: list[str] = []
        top = self.path(base)
        try:
            self._walk(top, base, prefix, start_after, keys)
        except OSError as err:
            raise _translate(err, f"listing {top}") from err
        keys.sort()  # "a.json" sorts before "a/x" although the walk visits directory "a" first
        return iter(keys)

    def _walk(self, directory: str, key_dir: str, prefix: str, start_after: str, out: builtins.list[str]) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except FileNotFoundError:
            return  # nothing written there yet
        except NotADirectoryError:
            return
        for entry in entries:
            key = f"{key_dir}/{entry.name}" if key_dir else entry.name
            if entry.is_dir(follow_symlinks=True):
                sub = key + "/"
                # Skip a subtree that lies wholly before start_after or outside the prefix.
                if not (sub.startswith(prefix) or prefix.startswith(sub)):
                    continue
                if start_after and sub < start_after[: len(sub)]:
                    continue
                self._walk(entry.path, key, prefix, start_after, out)
            elif key.startswith(prefix) and key > start_after and not entry.name.endswith(TMP_SUFFIX):
                out.append(key)

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        path = self.path(key)
        try:
            if not _PREAD:
                with open(path, "rb") as f:
                    if start:
                        f.seek(start)
                    return f.read() if length is None else f.read(length)
            fd = os.open(path, _READ_FLAGS)
            try:
                return _pread(fd, start, length)
            finally:
                os.close(fd)
        except OSError as err:
            raise _translate(err, f"reading {path}") from err

    def read_many(self, requests: Sequence[ReadRequest]) -> builtins.list[bytes]:
        return [self.read(r.key, start=r.start, length=r.length) for r in requests]

    def exists(self, key: str) -> bool:
        return os.path.exists(self.path(key))

    def write(self, key: str, data: Buffer | Iterable[Buffer]) -> None:
        writer = self.open_write(key)
        try:
            if isinstance(data, (bytes, bytearray, memoryview)):
                writer.write(data)
            else:
                for part in data:
                    writer.write(part)
            writer.commit()
        except BaseException:
            writer.abort()
            raise

    def open_write(self, key: str) -> _LocalWriter:
        return _LocalWriter(self.path(key), self._made_dirs)

    def delete(self, key: str) -> None:
        try:
            os.remove(self.path(key))
        except FileNotFoundError:
            pass
        except OSError as err:
            if err.errno != errno.ENOENT:
                raise _translate(err, f"deleting {self.path(key)}") from err

    def capabilities(self) -> Capabilities:
        """Direct reads, memory maps and file paths; writes commit in place."""
        return Capabilities(Writes.DIRECT, direct_reads=self, memory_maps=self, local_paths=self)

    def size(self, key: str) -> int:
        """Bytes ``key`` holds (the ``direct_reads`` capability, with ``read_into``: a reader checks
        a byte range an index states against it before allocating memory for it)."""
        path = self.path(key)
        try:
            return os.stat(path).st_size
        except OSError as err:
            raise _translate(err, f"reading {path}") from err

    def map(self, key: str) -> memoryview:
        """The bytes of ``key`` as a read-only view of the file mapped into memory (the ``memory_maps``
        capability): a reader then copies just the byte ranges it needs, page cache to its buffer,
        with no system call per range. The file is closed at once; the mapping lives as long as the view."""
        path = self.path(key)
        try:
            with open(path, "rb", buffering=0) as f:
                if os.fstat(f.fileno()).st_size == 0:
                    return memoryview(b"")
                flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # page tables now, not a fault per page
                return memoryview(mmap.mmap(f.fileno(), 0, flags=flags, prot=mmap.PROT_READ))
        except OSError as err:
            raise _translate(err, f"reading {path}") from err

    def read_into(self, key: str, buffer: bytearray | memoryview, *, start: int = 0) -> int:
        """Fill ``buffer`` with the bytes of ``key`` from ``start`` on; return how many there were.

        Fewer than ``len(buffer)`` at the end of the object. The ``direct_reads`` capability: a
        reader gets writable memory holding just one copy of the bytes (no ``bytes`` in between).
        """
        path = self.path(key)
        view = memoryview(buffer).cast("B")
        size = len(view)
        got = 0
        try:
            if not _PREAD:
                with open(path, "rb", buffering=0) as f:
                    if start:
                        f.seek(start)
                    while got < size:
                        n = f.readinto(view[got:])
                        if not n:
                            break
                        got += n
                return got
            fd = os.open(path, _READ_FLAGS)
            try:
                while got < size:
                    n = os.preadv(fd, [view[got:] if got else view], start + got)
                    if not n:
                        break
                    got += n
            finally:
                os.close(fd)
        except OSError as err:
            raise _translate(err, f"reading {path}") from err
        return got


__all__ = ["TMP_SUFFIX", "LocalStorage"]
