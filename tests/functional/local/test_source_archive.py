"""A .tar.gz submit directory cannot write outside its job, on any Python: crafted archives (CVE-2025-4517's
symlink chain past PATH_MAX then a hard link, ``../``, absolute names, links out, devices) are refused with
exit 2 naming the member, before anything runs, and leave no ``code/`` behind; a good archive (with links
inside it) runs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.jobs import archive
from tests.functional.local.support import request, settings

TRAIN = b"import helpers.util as u\nprint('trained with', u.VALUE)\n"


class Archive:
    """Builds a .tar.gz member by member, exactly as given (no normalization by tarfile.add)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tar = tarfile.open(path, "w:gz")  # noqa: SIM115

    def add(self, name: str, kind: bytes = tarfile.REGTYPE, *, data: bytes = b"", link: str = "",
            mode: int = 0o644) -> Archive:
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode = kind, link, mode
        if kind == tarfile.REGTYPE:
            info.size = len(data)
            self.tar.addfile(info, io.BytesIO(data))
        else:
            self.tar.addfile(info)
        return self

    def close(self) -> Path:
        self.tar.close()
        return self.path


def cve_2025_4517(path: Path, victim_from_root: str) -> Path:
    """The published shape: directories of 247-character names, each reached by a one-letter symlink, 16 deep
    (past PATH_MAX once resolved); a link climbing back; a link through the chain to a file outside; a hard
    link to that; then a regular member of the hard link's name, whose data lands in the outside file."""
    a = Archive(path)
    comp, steps, here = "d" * 247, "abcdefghijklmnop", ""
    for step in steps:
        a.add(os.path.join(here, comp), tarfile.DIRTYPE, mode=0o755)
        a.add(os.path.join(here, step), tarfile.SYMTYPE, link=comp)
        here = os.path.join(here, comp)
    climb = os.path.join(*steps, "l" * 254)
    a.add(climb, tarfile.SYMTYPE, link="../" * len(steps))
    a.add("escape", tarfile.SYMTYPE, link=f"{climb}/{victim_from_root}")
    a.add("victimlink", tarfile.LNKTYPE, link="escape")
    a.add("victimlink", data=b"OVERWRITTEN BY THE ARCHIVE\n")
    a.add("train.py", data=TRAIN)
    return a.close()


def _submit_request(name: str, source: Path) -> dict[str, object]:
    return request(name, HyperParameters={"sagemaker_program": json.dumps("train.py"),
                                          "sagemaker_submit_directory": json.dumps(source.as_uri())})


def _run_cli(tmp_path: Path, req: dict[str, object], repo_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(req))
    return subprocess.run([sys.executable, "-m", "sdk_ext.cli", "run", "--request", str(path), "--jobs-dir",
                           str(tmp_path / "jobs"), "--no-auto-stop"], env=repo_env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_cves_archive_is_refused_with_exit_2_and_the_outside_file_is_untouched(tmp_path: Path,
                                                                                  repo_env: dict[str, str]) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("original\n")
    # the job unpacks into <tmp>/jobs/evil/code: the victim is three levels up from there
    evil = cve_2025_4517(tmp_path / "evil.tar.gz", "../../../outside.txt")
    done = _run_cli(tmp_path, _submit_request("evil", evil), repo_env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert outside.read_text() == "original\n"
    assert "member 'a'" in done.stderr or "member 'a/" in done.stderr or "member 'escape'" in done.stderr
    assert "Traceback" not in done.stderr
    job = tmp_path / "jobs" / "evil"
    assert not (job / "code").exists() and not list(job.glob(".code.unpacking-*"))
    assert not (job / "job.json").exists()  # nothing ran


def test_the_cves_archive_does_escape_tarfiles_data_filter_on_this_python(tmp_path: Path) -> None:
    """Why archive.py exists: on an unpatched Python the data filter passes it (skipped where fixed)."""
    outside = tmp_path / "outside.txt"
    outside.write_text("original\n")
    evil = cve_2025_4517(tmp_path / "evil.tar.gz", "../../outside.txt")
    target = tmp_path / "job" / "code"
    target.mkdir(parents=True)
    try:
        with tarfile.open(evil) as tar:
            tar.extractall(target, filter="data")
    except (tarfile.TarError, OSError) as err:
        pytest.skip(f"this Python's tarfile refuses it ({type(err).__name__}): patched")
    assert outside.read_text() == "OVERWRITTEN BY THE ARCHIVE\n"


Maker = Callable[[Archive], Archive]
REFUSED: dict[str, tuple[Maker, str, str]] = {
    "dotdot": (lambda a: a.add("../evil.py", data=b"x"), "../evil.py", "contains '..'"),
    "dotdot-inside": (lambda a: a.add("src/../../evil.py", data=b"x"), "src/../../evil.py", "contains '..'"),
    "absolute": (lambda a: a.add("/tmp/sdk-ext-evil.py", data=b"x"), "/tmp/sdk-ext-evil.py", "absolute path"),
    "symlink-out": (lambda a: a.add("data", tarfile.SYMTYPE, link="../../.."), "data", "may resolve outside"),
    "symlink-absolute": (lambda a: a.add("etc", tarfile.SYMTYPE, link="/etc"), "etc", "may resolve outside"),
    "symlink-up-after-down": (lambda a: a.add("d/x", tarfile.SYMTYPE, link="e/../.."), "d/x", "may resolve outside"),
    "write-through-symlink": (lambda a: a.add("lnk", tarfile.SYMTYPE, link=".").add("lnk/f.py", data=b"x"),
                              "lnk/f.py", "below 'lnk'"),
    "hardlink-out": (lambda a: a.add("pw", tarfile.LNKTYPE, link="/etc/passwd"), "/etc/passwd", "absolute path"),
    "hardlink-unknown": (lambda a: a.add("pw", tarfile.LNKTYPE, link="nothing.py"), "pw", "not an earlier regular"),
    "char-device": (lambda a: a.add("null", tarfile.CHRTYPE), "null", "is a character device"),
    "block-device": (lambda a: a.add("sda", tarfile.BLKTYPE), "sda", "is a block device"),
    "fifo": (lambda a: a.add("pipe", tarfile.FIFOTYPE), "pipe", "is a FIFO"),
    "file-then-symlink": (lambda a: a.add("x.py", data=b"1").add("x.py", tarfile.SYMTYPE, link="train.py"), "x.py",
                          "earlier member of that name is a file"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_crafted_member_is_refused_naming_it_and_nothing_is_left(case: str, tmp_path: Path) -> None:
    make, member, why = REFUSED[case]
    built = make(Archive(tmp_path / "src.tar.gz").add("train.py", data=TRAIN)).close()
    target = tmp_path / "job" / "code"
    with pytest.raises(ConfigError) as refused:
        archive.extract(built, target)
    assert f"member {member!r}" in str(refused.value) and why in str(refused.value)
    assert not target.exists() and not list(target.parent.glob("*"))


def test_a_good_archive_with_links_inside_it_runs_as_a_job(tmp_path: Path) -> None:
    from sdk_ext.local import run_training_job

    built = (Archive(tmp_path / "src.tar.gz")
             .add("./", tarfile.DIRTYPE, mode=0o755)
             .add("./train.py", data=TRAIN, mode=0o4777)  # set-uid and world-writable bits are dropped
             .add("lib/util.py", data=b"VALUE = 42\n")
             .add("helpers", tarfile.SYMTYPE, link="lib")  # a directory link, as tar.add keeps it
             .add("lib/alias.py", tarfile.SYMTYPE, link="../lib/util.py")
             .add("lib/copy.py", tarfile.LNKTYPE, link="lib/util.py")
             .close())
    final = run_training_job(_submit_request("good", built), settings=settings(tmp_path, auto_stop=False))
    assert final["TrainingJobStatus"] == "Completed", final.get("FailureReason")
    code = tmp_path / "jobs" / "good" / "code"
    assert "trained with 42" in (tmp_path / "jobs" / "good" / "logs" / "training.log").read_text()
    assert (code / "lib" / "alias.py").read_text() == "VALUE = 42\n" and (code / "helpers").is_symlink()
    assert (code / "lib" / "copy.py").read_text() == "VALUE = 42\n" and not (code / "lib" / "copy.py").is_symlink()
    assert os.stat(code / "train.py").st_mode & 0o7777 == 0o755
