"""Keras hook tests run training in subprocesses (Keras fixes its backend at import): one per scenario and
backend, each cached for the session. Without keras (or tensorflow for the TF backend) the tests skip;
under CI (SDK_EXT_REQUIRE_KERAS=1) that is a failure."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]


def require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        msg = f"{module} is not installed (pip install 'sdk-ext[keras]' / 'sdk-ext[tensorflow]')"
        if os.environ.get("SDK_EXT_REQUIRE_KERAS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


def subprocess_env(backend: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", **extra)
    env.pop("SMDEBUG_CONFIG_FILE_PATH", None)
    return env


def backend_of(label: str) -> str:
    return "torch" if label.startswith("torch") else "tensorflow"


ALL = "weights,biases,gradients,optimizer_variables,layers,inputs,outputs"
_LAYERS_EVERY_3 = {"collections": "layers,gradients,weights", "interval": "3"}
_RULE_RUNS = [(f"rules:graph:{case}", {}) for case in ("dead", "saturated", "healthy")]
#: Every run the tests use, by backend: one process per backend runs them all (TensorFlow imports slowly).
RUNS: dict[str, list[tuple[str, dict[str, str]]]] = {
    "torch": [
        ("fit:graph", {"collections": ALL}),
        ("fit:graph", {}),
        ("fit:graph", {"grad_interval": "2"}),
        ("custom-torch", {}),
        ("fit-broken:graph", {}),
        *_RULE_RUNS,
    ],
    "tensorflow": [
        ("fit:graph", {"collections": ALL}),
        ("fit:jit", {"collections": ALL}),
        ("fit:graph", {}),
        ("fit:eager", {}),
        ("fit:jit", {}),
        ("fit:graph", {"grad_interval": "2"}),
        ("fit:jit", {"grad_interval": "2"}),
        ("fit:graph", _LAYERS_EVERY_3),
        ("fit:jit", _LAYERS_EVERY_3),
        ("custom-tf:tape", {}),
        ("custom-tf:graph", {}),
        ("custom-tf:graph-jit", {}),
        ("fit-broken:jit", {}),
        *_RULE_RUNS,
    ],
}


def _key(scenario: str, params: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return scenario, tuple(sorted(params.items()))


@pytest.fixture(scope="session")
def run_scenario(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., tuple[Path, dict[str, Any]]]:
    """``run_scenario(backend, scenario, **params) -> (trial dir, result.json)`` for a run listed in RUNS;
    the first request of a backend runs all of that backend's runs in one process."""
    done: dict[str, dict[Any, Path]] = {}

    def run(backend: str, scenario: str, **params: str) -> tuple[Path, dict[str, Any]]:
        require("keras")
        if backend == "tensorflow":
            require("tensorflow")
        key = _key(scenario, params)
        assert key in [_key(*r) for r in RUNS[backend]], f"add {key} to RUNS[{backend!r}] in {__file__}"
        if backend not in done:
            root = tmp_path_factory.mktemp(f"keras-{backend}")
            outs = {_key(*r): root / f"run{i}" for i, r in enumerate(RUNS[backend])}
            spec = [{"scenario": s, "params": p, "out": str(outs[_key(s, p)])} for s, p in RUNS[backend]]
            (root / "spec.json").write_text(json.dumps(spec))
            proc = subprocess.run(
                [sys.executable, "-m", "tests.functional.keras.scenarios", str(root / "spec.json")],
                cwd=REPO, env=subprocess_env(backend), capture_output=True, text=True, timeout=1800, check=False,
            )
            assert proc.returncode == 0, f"the {backend} runs failed:\n{proc.stderr[-6000:]}"
            done[backend] = outs
        out = done[backend][key]
        return out / "trial", json.loads((out / "result.json").read_text())

    return run
