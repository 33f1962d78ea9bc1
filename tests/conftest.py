"""Shared test fixtures: where the reference data (tests/fixtures) and the smdebug venv are."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.moto_s3 import moto_server, s3  # noqa: F401  (fixtures: moto on 127.0.0.1, a bucket per test)

REPO = Path(__file__).resolve().parent.parent
# Data written by the real tools (smdebug 1.0.34, SageMaker SDK 2.257.7, a captured event), kept in the
# repository with its provenance (tests/fixtures/README.md): no test reads outside the clone.
FIXTURES = REPO / "tests" / "fixtures"
SMDEBUG_FIXTURES = FIXTURES / "smdebug"


def _smdebug_python() -> Path | None:
    explicit = os.environ.get("SMDEBUG_PYTHON")
    candidates = [Path(explicit)] if explicit else []
    candidates += [REPO / ".venv-smdebug" / "bin" / "python"]
    for c in candidates:
        if c.exists():
            return c
    return None


@pytest.fixture(scope="session")
def smdebug_python() -> Path:
    """The interpreter of the venv holding real smdebug 1.0.34 (numpy 2.2.6, protobuf 3.20.3).

    `make test` creates it as .venv-smdebug; SMDEBUG_PYTHON overrides. Missing it is a failure
    under CI (SDK_EXT_REQUIRE_SMDEBUG=1), a skip otherwise.
    """
    python = _smdebug_python()
    if python is None:
        msg = "smdebug venv not found: run `make smdebug-venv` or set SMDEBUG_PYTHON"
        if os.environ.get("SDK_EXT_REQUIRE_SMDEBUG") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return python


@pytest.fixture
def repo_env() -> dict[str, str]:
    """Environment for subprocesses that import sdk_ext from this checkout."""
    env = dict(os.environ)
    paths = [str(REPO), str(REPO / "lambda"), str(REPO / "rules")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PYTHON", sys.executable)
    return env
