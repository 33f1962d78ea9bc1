"""The wheel is the product: built from the sources, installed into a fresh venv outside the checkout,
``sdk-ext run train.py --rule ExplodingTensor ...`` runs the README's loop to IssuesFound, Stopped and a report.

The fresh venv (no pip of its own: this environment's pip installs into it) gets its heavy dependencies (torch, numpy, boto3, ...) from this test's own environment
through a directory of links that holds every distribution there except sdk_ext itself, so pip resolves
``sdk-ext[pytorch]`` against them (``--no-index``: nothing is downloaded) and the only sdk_ext the job can
import is the installed wheel.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("build") is None,
                       reason="needs the 'build' package (the test extra installs it)"),
]

SOURCES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "sdk_ext", "lambda")
NOT_DEPENDENCIES = ("sdk_ext", "sdk-ext", "__editable__", "pip")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(wheel, build output): ``python -m build`` (sdist, then the wheel from the sdist) of a copy of the sources."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    result = subprocess.run([sys.executable, "-m", "build", "--outdir", str(root / "dist"), str(src)],
                            capture_output=True, text=True, timeout=600, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    wheels = list((root / "dist").glob("sdk_ext-*.whl"))
    assert len(wheels) == 1, output
    return wheels[0], output


def test_building_prints_no_deprecation_warning(built: tuple[Path, str]) -> None:
    _, output = built
    assert not re.search(r"deprecat", output, flags=re.IGNORECASE), output


def test_the_wheel_holds_the_package_the_function_and_the_evaluator_and_nothing_else(built: tuple[Path, str]) -> None:
    wheel, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "sdk_ext").rglob("*.py") if "__pycache__" not in p.parts}
    assert sources <= names
    # lambda/ (the CDK asset) ships as sdk_ext/lambda_function/, byte for byte
    for name in ("auto_stop.py", "auto_stop_policy.py"):
        assert zipfile.ZipFile(wheel).read(f"sdk_ext/lambda_function/{name}") == (REPO / "lambda" / name).read_bytes()
    assert {"sdk_ext/evaluator.py", "sdk_ext/py.typed", "sdk_ext/format/event.proto"} <= names
    package = {n for n in names if ".dist-info/" not in n}
    stray = {n for n in package if not n.startswith("sdk_ext/") or "__pycache__" in n or n.endswith((".pyc", ".pyo"))
             or n.startswith(("tests/", "build/"))}
    assert not stray
    assert package - sources - {"sdk_ext/lambda_function/auto_stop.py", "sdk_ext/lambda_function/auto_stop_policy.py",
                                "sdk_ext/py.typed", "sdk_ext/format/event.proto"} == set()


def test_the_metadata_says_license_python_classifiers_and_urls(built: tuple[Path, str]) -> None:
    wheel, _ = built
    with zipfile.ZipFile(wheel) as zf:
        info = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(info).decode())
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in zf.namelist())
    assert meta["Metadata-Version"] >= "2.4"
    assert meta["License-Expression"] == "Apache-2.0" and meta["License"] is None
    assert meta["Requires-Python"] == ">=3.10"
    classifiers = meta.get_all("Classifier") or []
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the expression replaces them
    assert meta.get_all("Project-URL")
    requires = meta.get_all("Requires-Dist") or []
    assert any(r.startswith("torch") and 'extra == "pytorch"' in r for r in requires)


def _dependency_links(target: Path) -> Path:
    """A directory of symlinks to everything importable from this environment's site-packages, but sdk_ext."""
    target.mkdir()
    dirs = [p for p in dict.fromkeys([*site.getsitepackages(), *sys.path]) if p.endswith("site-packages")]
    for directory in map(Path, dirs):
        if not directory.is_dir():
            continue
        for entry in directory.iterdir():
            name = entry.name
            if (name.lower().replace("-", "_").startswith(tuple(n.replace("-", "_") for n in NOT_DEPENDENCIES))
                    or entry.suffix in (".pth", ".egg-link") or (target / name).exists()):
                continue
            (target / name).symlink_to(entry)
    return target


def test_a_fresh_venv_outside_the_checkout_runs_the_readme_loop(built: tuple[Path, str], tmp_path: Path) -> None:
    wheel, _ = built
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "zz_dependencies.pth").write_text(f"{_dependency_links(tmp_path / 'deps')}\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("SDK_EXT_")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = tmp_path / "work"
    work.mkdir()
    assert REPO not in work.resolve().parents

    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
                              f"{wheel}[pytorch]"], cwd=work, env=env, capture_output=True, text=True, timeout=600,
                             check=False)
    assert install.returncode == 0, install.stdout + install.stderr
    assert re.search(r"Successfully installed sdk[-_]ext-0\.1\.0", install.stdout), install.stdout

    code = ("import json, sdk_ext, sdk_ext.evaluator; from sdk_ext.local.jobs import deployment as d; "
            "print(json.dumps([sdk_ext.__file__, str(d.lambda_dir()), d.evaluator_command()]))")
    where = subprocess.run([str(python), "-c", code],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert where.returncode == 0, where.stderr
    package, lambda_dir, evaluator = json.loads(where.stdout)
    assert Path(package).is_relative_to(purelib) and Path(lambda_dir) == purelib / "sdk_ext" / "lambda_function"
    assert evaluator == ["-m", "sdk_ext.evaluator"]

    shutil.copy(REPO / "examples" / "pytorch_diverge" / "train.py", work / "train.py")
    run = subprocess.run(
        [str(venv / "bin" / "sdk-ext"), "run", "train.py", "--job-name", "wheel-job", "--rule", "ExplodingTensor",
         "--collection", "weights", "--collection", "gradients", "--collection", "losses", "--save-interval", "1",
         "--report", "--", "--steps", "200", "--diverge-at", "10", "--eval-every", "1000", "--step-time", "0.01"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Job wheel-job: Stopped (Stopped)", run.stdout
    stopped = [line for line in lines if line.startswith("  rule ExplodingTensor stopped the job at step ")]
    assert stopped, run.stdout
    job = next(work.rglob("wheel-job/job.json"))
    describe = json.loads(job.read_text())
    assert describe["TrainingJobStatus"] == "Stopped"
    assert [(r["RuleConfigurationName"], r["RuleEvaluationStatus"])
            for r in describe["DebugRuleEvaluationStatuses"]] == [("ExplodingTensor", "IssuesFound")]
    report = job.parent / "report.html"
    assert f"  report: {report.resolve()}" in lines
    assert "Rule ExplodingTensor stopped the job at step" in report.read_text()
