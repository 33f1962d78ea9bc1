"""`make demo` end to end: the bundled PyTorch example diverges, a rule catches it, the handler stops it."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (REPO / "rules" / "evaluate.py").is_file() or importlib.util.find_spec("torch") is None
                       or not (REPO / "sdk_ext" / "pytorch").is_dir(),
                       reason="needs torch, sdk_ext.pytorch and rules/evaluate.py"),
]


def test_demo_stops_the_diverging_job_and_writes_the_report(tmp_path: Path, repo_env: dict[str, str]) -> None:
    result = subprocess.run([sys.executable, str(REPO / "examples" / "pytorch_diverge" / "demo.py"),
                             "--jobs-dir", str(tmp_path / "demo")], env=repo_env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    stopped = re.search(r"^  rule (\w+) stopped the job at step (\d+)$", result.stdout, flags=re.MULTILINE)
    assert stopped is not None, result.stdout
    assert stopped.group(1) in ("ExplodingTensor", "LossNotDecreasing")
    assert 40 <= int(stopped.group(2)) <= 60  # the learning rate jumps at step 40
    report = re.search(r"^  report: (.+)$", result.stdout, flags=re.MULTILINE)
    assert report is not None and Path(report.group(1)).is_file()
    html = Path(report.group(1)).read_text()
    assert f"Rule {stopped.group(1)} stopped the job at step {stopped.group(2)}." in html
    assert html.count("<svg ") == 3
