"""Storage on a local directory.

Writes go to ``<key>.<pid>-<random>.tmp`` and are renamed into place on commit, so a reader (or a crash) never
turns a half-written file into data; listings skip ``.tmp`` names.
"""

from __future__ import annotations

import builtins
import errno
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from typing import IO

from sdk_ext.exceptions import StorageAccessDenied, StorageError, StorageNotFound
from sdk_ext.storage.base import Buffer, ReadRequest

TMP_SUFFIX = ".tmp"
_SLASH = os.sep == "/" and os.altsep is None


def _translate(err: OSError, what: str) -> StorageError:
    if isinstance(err, FileNotFoundError):
        return StorageNotFound(f"{what}: no such file or directory")
    if isinstance(err, PermissionError):
        return StorageAccessDenied(f"{what}: permission denied; check the directory's owner and mode")
    return StorageError(f"{what}: {err.strerror or err}")


class _LocalWriter:
    """Writes ``path.tmp``; ``commit`` renames it to ``path``."""

    def __init__(self, path: str) -> None:
        self._path = path
        # unique per writer: two processes may commit the same key (every worker writes the end marker)
        self._tmp = f"{path}.{os.getpid()}-{secrets.token_hex(4)}{TMP_SUFFIX}"
        self._file: IO[bytes] | None = None

    def _open(self) -> IO[bytes]:
        if self._file is None:
            os.makedirs(os.path.dirname(self._path), exist_ok=True)
            self._file = open(self._tmp, "wb")  # noqa: SIM115 - open until commit() or abort()
        return self._file

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
        if self._file is not None:
            self._file.close()
            self._file = None
        try:
            os.remove(self._tmp)
        except FileNotFoundError:
            pass


class LocalStorage:
    """A trial root on local disk. The constructor touches nothing."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.path.expanduser(os.fspath(root)))

    def __repr__(self) -> str:
        return f"LocalStorage({self.root!r})"

    @property
    def uri(self) -> str:
        return self.root

    def path(self, key: str) -> str:
        """The filesystem path of ``key``."""
        if not key:
            return self.root
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
            with open(path, "rb") as f:
                if start:
                    f.seek(start)
                return f.read() if length is None else f.read(length)
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
        return _LocalWriter(self.path(key))

    def delete(self, key: str) -> None:
        try:
            os.remove(self.path(key))
        except FileNotFoundError:
            pass
        except OSError as err:
            if err.errno != errno.ENOENT:
                raise _translate(err, f"deleting {self.path(key)}") from err

    def read_into(self, key: str, buffer: bytearray | memoryview, *, start: int = 0) -> int:
        """Fill ``buffer`` with the bytes of ``key`` from ``start`` on; return how many there were.

        Fewer than ``len(buffer)`` at the end of the object. An optional Storage capability: a
        reader gets writable memory holding just one copy of the bytes (no ``bytes`` in between).
        """
        path = self.path(key)
        view = memoryview(buffer).cast("B")
        got = 0
        try:
            with open(path, "rb", buffering=0) as f:
                if start:
                    f.seek(start)
                while got < len(view):
                    n = f.readinto(view[got:])
                    if not n:
                        break
                    got += n
        except OSError as err:
            raise _translate(err, f"reading {path}") from err
        return got


__all__ = ["TMP_SUFFIX", "LocalStorage"]
