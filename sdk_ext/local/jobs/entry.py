"""What a local request runs, and how its failure reads (SageMaker's training toolkit's wording).

What a local request runs (first match):

1. ``entry_point=`` given to the runner (``sdk-ext run SCRIPT`` does this): ``python SCRIPT``;
2. an SDK v3 ModelTrainer request whose ``sm_drivers`` channel is local: the entry script of its
   ``sourcecode.json`` in the ``code`` channel (or its ``command``), as v3's container script runs it;
3. ``AlgorithmSpecification.ContainerEntrypoint`` (+ ``ContainerArguments``): that command, as is;
4. ``HyperParameters.sagemaker_program`` (+ ``sagemaker_submit_directory``: a local directory, ``file://``
   URI or ``.tar.gz``), as SageMaker's framework estimators send it: ``python <program>`` in that directory.

A Python entry point gets the non-``sagemaker_*`` hyperparameters as ``--name value`` arguments, then
``script_args``. It runs through its framework's zero-change launcher (``python -m sdk_ext.pytorch.run``)
when it imports a framework that has one, as SageMaker's framework containers add the hook
(frameworks.py); ``zero_change`` True forces that, False turns it off, None decides by the imports.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.jobs import archive as archive_module
from sdk_ext.local.jobs import frameworks, layout
from sdk_ext.local.jobs import launcher as launcher_mod
from sdk_ext.local.request import check as request_check

_FILE_LINE = re.compile(r'^File "(.+)", line (\d+)')
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|Failure)\b.*$|^[A-Za-z_][\w.]*: .+$")


@dataclass(frozen=True, slots=True)
class Command:
    """What the job runs: argv, working directory, and the entry point's name for SM_* variables."""

    argv: list[str]
    cwd: Path
    entry_point: str
    user_args: list[str]


def check_request(request: Mapping[str, Any]) -> None:
    """Raise ConfigError listing every name and path SageMaker's API would refuse (:mod:`.request_check`)."""
    request_check.check_request(request)


def check_paths(job_dir: layout.JobDir, request: Mapping[str, Any]) -> None:
    """Raise ConfigError naming every field that would put a file of the job outside ``job_dir``."""
    request_check.check_request(request, job_dir.root)



def _python_command(python: str, script: Path, cwd: Path, hps: Mapping[str, Any], script_args: Sequence[str],
                    zero_change: bool | None) -> Command:
    user_args = [*layout.hyperparameter_args(hps), *script_args]
    module = frameworks.launcher(script, zero_change)
    launcher = [python, "-m", module] if module else [python]
    return Command([*launcher, str(script), *user_args], cwd, script.name, user_args)


def resolve_command(request: Mapping[str, Any], job_dir: layout.JobDir, *, python: str,
                    entry_point: str | os.PathLike[str] | None, script_args: Sequence[str],
                    zero_change: bool | None) -> Command:
    """What the job runs (the module docstring's rules).

    Raises:
        ConfigError: the request names nothing runnable, or the script or directory does not exist.
    """
    hps = request.get("HyperParameters") or {}
    if entry_point is not None:
        script = Path(entry_point).resolve()
        if not script.is_file():
            raise ConfigError(f"entry point {os.fspath(entry_point)!r} is not a file", where="local job")
        return _python_command(python, script, script.parent, hps, script_args, zero_change)
    spec = request.get("AlgorithmSpecification") or {}
    v3 = launcher_mod.v3_source(request)
    if v3 is not None:
        return _v3_command(v3, python=python, hps=hps, script_args=script_args, zero_change=zero_change)
    if spec.get("ContainerEntrypoint"):
        argv = [*spec["ContainerEntrypoint"], *(spec.get("ContainerArguments") or []), *script_args]
        return Command([str(a) for a in argv], job_dir.root, str(argv[0]), [str(a) for a in argv[1:]])
    program = hps.get("sagemaker_program")
    if program is None:
        raise ConfigError(
            "the request names no entry point: set HyperParameters.sagemaker_program (and "
            "sagemaker_submit_directory, a local directory), or AlgorithmSpecification.ContainerEntrypoint, "
            "or pass entry_point= (sdk-ext run SCRIPT)", where="local job")
    program = str(layout.decode_hyperparameter(program))
    submit = hps.get("sagemaker_submit_directory")
    code_dir = Path.cwd()
    if submit is not None:
        source = layout.local_source(str(layout.decode_hyperparameter(submit)))
        if source is None:
            raise ConfigError(f"sagemaker_submit_directory {submit!r}: the local runner needs a local directory, "
                              "a file:// URI or a local .tar.gz (S3 is not downloaded)", where="local job")
        code_dir = _unpack(source, job_dir.root / "code") if source.is_file() else source.resolve()
    script = code_dir / program
    if not request_check.inside(code_dir, script):
        raise ConfigError(f"HyperParameters.sagemaker_program {program!r} resolves outside its submit directory "
                          f"{code_dir}; name a script inside it (e.g. train.py)", where="CreateTrainingJob request")
    if not script.is_file():
        raise ConfigError(f"sagemaker_program {program!r} is not a file in {code_dir}", where="local job")
    return _python_command(python, script, code_dir, hps, script_args, zero_change)


def _v3_command(v3: launcher_mod.V3Source, *, python: str, hps: Mapping[str, Any], script_args: Sequence[str],
                zero_change: bool | None) -> Command:
    """An SDK v3 ModelTrainer request (its ``sm_drivers`` channel is local): what its container script
    (sm_train.sh) runs, without the container's /opt/ml paths: ``SourceCode.command`` through bash, else the
    entry script in the ``code`` channel (each rank of a distributed job: launcher.py)."""
    code_dir = v3.code_dir or v3.drivers_dir
    command = v3.source_code.get("command")
    if command:
        return Command(["/bin/bash", "-c", str(command), *script_args], code_dir, "/bin/bash", [str(command)])
    entry = str(v3.source_code.get("entry_script") or "")
    script = code_dir / entry
    if not entry or not request_check.inside(code_dir, script) or not script.is_file():
        raise ConfigError(f"sm_drivers/sourcecode.json entry_script {entry!r} is not a file in the code channel "
                          f"{code_dir}", where="local job")
    return _python_command(python, script, code_dir, hps, script_args, zero_change)


def _unpack(archive: Path, target: Path) -> Path:
    """A .tar.gz submit directory, unpacked safely (archive.py: nothing of it can land outside ``target``)."""
    if not archive_module.looks_like_archive(archive):
        raise ConfigError(f"sagemaker_submit_directory {str(archive)!r} is a file but not a tar archive",
                          where="local job")
    return archive_module.extract(archive, target)


def _signal_name(number: int) -> str | None:
    """``SIGKILL`` for 9; None for a number that is no signal here."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def failure_reason(exit_code: int, command: Command, job_dir: layout.JobDir, output_tail: str) -> str:
    """SageMaker's FailureReason: ``output/failure`` if written, else the training toolkit's message."""
    try:
        written = job_dir.failure.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        written = ""
    if written:
        return written
    lines = [ln.strip() for ln in output_tail.splitlines() if ln.strip()]
    message = next((ln for ln in reversed(lines) if _ERROR_LINE.match(ln)), lines[-1] if lines else "")
    if message.startswith(("SyntaxError", "IndentationError", "TabError")):
        # the traceback's last frame names the file and line the parser stopped at; the message does not
        where = next((m for ln in reversed(lines) if (m := _FILE_LINE.match(ln))), None)
        if where is not None:
            message += f" ({where.group(1)}, line {where.group(2)})"
    killer = _signal_name(-exit_code) if exit_code < 0 else None
    code = f"{exit_code} (killed by {killer})" if killer else str(exit_code)
    return (f"AlgorithmError: ExecuteUserScriptError:\nExitCode {code}\nErrorMessage \"{message}\"\n"
            f"Command \"{shlex.join(command.argv)}\", exit code: {exit_code}")
