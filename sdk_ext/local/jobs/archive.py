"""Unpacking a source archive (``sagemaker_submit_directory`` as a ``.tar.gz``) into the job directory, so
that nothing of it can land outside, on every Python the project runs on.

``tarfile``'s own ``filter="data"`` is not enough: before Python 3.10.18 / 3.11.13 / 3.12.11 / 3.13.4 a
chain of symlinks whose resolved path is longer than ``PATH_MAX`` makes its check (``os.path.realpath``)
give up and pass a link that the kernel resolves outside (CVE-2025-4517); a hard link through it then
writes to any file the user can write. So the check here never asks the file system where a path goes;
it decides from the member names alone, and extraction never follows a link:

* every member is checked before anything is written: a name must be relative, without ``..``, and not
  below a symlink member; only directories, regular files, symlinks and hard links are accepted (no
  devices, FIFOs); a name may not be a symlink and something else at once;
* a symlink's target must be relative and of the form ``../../down/to/name``: ``..`` only at its start,
  never more of them than the link's own depth. By induction every link then resolves inside the tree:
  it climbs real directories that the archive made and descends through names that are real directories
  or such links (a ``..`` after a descent, which could climb out of a link's target, is what is refused);
* a hard link must name an earlier regular-file member; it is written as a copy of that member's data
  (never ``link()``, which could reach a file outside);
* files are written first, with ``O_NOFOLLOW``, into a fresh directory that holds no link yet; the
  symlinks are made last; permissions keep the user's execute bits, never set-id or group/other write.

The tree is unpacked into a temporary directory beside the target and renamed into place once whole: a
refused or broken archive leaves nothing behind (no empty ``code/``). Symlinks inside a source
directory (the SageMaker SDK's ``tar.add`` keeps them) still work when they point inside it.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from sdk_ext.exceptions import ConfigError

WHERE = "sagemaker_submit_directory archive"
_COPY = 1 << 20


@dataclass(frozen=True, slots=True)
class _Plan:
    """What to make, in order: directories, then files and hard-link copies (archive order), then symlinks."""

    dirs: list[str]
    files: list[tuple[str, tarfile.TarInfo]]  # (name, the member whose data it gets)
    symlinks: list[tuple[str, str]]  # (name, target)


def _kind(member: tarfile.TarInfo) -> str:
    if member.isdir():
        return "directory"
    if member.isreg():
        return "file"
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hard link"
    if member.ischr():
        return "character device"
    if member.isblk():
        return "block device"
    if member.isfifo():
        return "FIFO"
    return f"member of tar type {member.type!r}"


def _name(raw: str, archive: Path, what: str = "member") -> str:
    """The member name, normalized (``./a//b/`` -> ``a/b``); ConfigError for an absolute or escaping one."""
    if not raw or raw.startswith("/"):
        raise _refuse(archive, raw, f"{what} has an absolute path")
    parts = [p for p in raw.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _refuse(archive, raw, f"{what} path contains '..', which would reach outside the directory")
    return "/".join(parts) or "."


def _refuse(archive: Path, member: str, why: str) -> ConfigError:
    return ConfigError(f"{str(archive)!r}: member {member!r}: {why}; refused before anything was unpacked or run "
                       "(rebuild the archive from the source directory, e.g. tar -czf sourcedir.tar.gz -C src .)",
                       where=WHERE)


def _symlink_target_inside(name: str, target: str) -> bool:
    """``target`` climbs at most the link's depth and then only descends (see the module docstring)."""
    if not target or target.startswith("/"):
        return False
    ups, descending = 0, False
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if descending:
                return False
            ups += 1
        else:
            descending = True
    return ups <= name.count("/")  # the link's directory is name's parent: that many levels below the root


def plan(tar: tarfile.TarFile, archive: Path) -> _Plan:
    """Check every member (ConfigError naming the first refused one) and decide what to make."""
    members = tar.getmembers()
    kinds: dict[str, str] = {}
    symlinks: dict[str, str] = {}
    regular: dict[str, tarfile.TarInfo] = {}  # name -> the member holding its data (a copy for hard links)
    result = _Plan([], [], [])
    for member in members:
        name = _name(member.name, archive)
        kind = _kind(member)
        if kind not in ("directory", "file", "symlink", "hard link"):
            raise _refuse(archive, member.name, f"is a {kind}; a source archive holds directories, files and links")
        if name == ".":
            if kind != "directory":
                raise _refuse(archive, member.name, "names the archive's root as a file or link")
            continue
        simple = "file" if kind == "hard link" else kind
        if kinds.get(name, simple) != simple:
            raise _refuse(archive, member.name, f"is a {kind}, but an earlier member of that name is a {kinds[name]}")
        kinds[name] = simple
        if kind == "directory":
            result.dirs.append(name)
        elif kind == "file":
            regular[name] = member
            result.files.append((name, member))
        elif kind == "symlink":
            if not _symlink_target_inside(name, member.linkname):
                raise _refuse(archive, member.name, f"is a symlink to {member.linkname!r}, which may resolve outside "
                              "the directory (only relative targets that climb no higher than the link and then "
                              "only descend are unpacked)")
            symlinks[name] = member.linkname
        else:
            source = _name(member.linkname, archive, "hard link target")
            if source not in regular:
                raise _refuse(archive, member.name, f"is a hard link to {member.linkname!r}, which is not an earlier "
                              "regular file of the archive")
            regular[name] = regular[source]
            result.files.append((name, regular[source]))
    for name in kinds:  # nothing is unpacked through a symlink of the archive
        parents = name.split("/")[:-1]
        for i in range(1, len(parents) + 1):
            prefix = "/".join(parents[:i])
            if prefix in symlinks:
                raise _refuse(archive, name, f"lies below {prefix!r}, which the archive makes a symlink")
            if kinds.get(prefix, "directory") != "directory":
                raise _refuse(archive, name, f"lies below {prefix!r}, which the archive makes a {kinds[prefix]}")
    result.symlinks.extend(symlinks.items())
    return result


def _write_file(tar: tarfile.TarFile, root: Path, name: str, member: tarfile.TarInfo) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = (member.mode & 0o755) | 0o600  # the owner can read and write; no set-id, no group/other write
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    with os.fdopen(fd, "wb") as out:
        source = tar.extractfile(member)
        if source is not None:
            shutil.copyfileobj(source, out, _COPY)
    os.chmod(path, mode)  # the umask may have taken bits away; no symlink exists in the tree yet
    os.utime(path, (member.mtime, member.mtime))


def extract(archive: Path, target: Path) -> Path:
    """Unpack ``archive`` into ``target`` (which must not exist yet); returns ``target`` resolved.

    Raises:
        ConfigError: not a tar archive, unreadable, or a member refused (named, with why); ``target`` is
            then not created.
    """
    try:
        tar = tarfile.open(archive, "r:*")  # noqa: SIM115 (closed below)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise ConfigError(f"{str(archive)!r} is a file but not a readable tar archive ({err})", where=WHERE) from err
    with tar:
        try:
            steps = plan(tar, archive)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise ConfigError(f"{str(archive)!r} cannot be read to its end ({err}); nothing was unpacked",
                              where=WHERE) from err
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.unpacking-", dir=target.parent))
        try:
            for name in steps.dirs:
                (scratch / name).mkdir(parents=True, exist_ok=True)
            for name, member in steps.files:
                _write_file(tar, scratch, name, member)
            for name, link in steps.symlinks:
                path = scratch / name
                path.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(link, path)
            os.chmod(scratch, 0o755)
            os.rename(scratch, target)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            shutil.rmtree(scratch, ignore_errors=True)
            raise ConfigError(f"{str(archive)!r} could not be unpacked into {target} ({err}); nothing was kept",
                              where=WHERE) from err
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
    return target.resolve()


def looks_like_archive(path: Path) -> bool:
    """Whether ``path`` is a tar archive (compressed or not)."""
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


__all__ = ["WHERE", "extract", "looks_like_archive", "plan"]

