"""`make demo` end to end: the bundled PyTorch example diverges, a rule catches it, the handler stops it."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (REPO / "rules" / "evaluate.py").is_file() or importlib.util.find_spec("torch") is None
                       or not (REPO / "sdk_ext" / "pytorch").is_dir(),
                       reason="needs torch, sdk_ext.pytorch and rules/evaluate.py"),
]


def first_non_finite_step(trial_dir: Path) -> int:
    from sdk_ext.trials import create_trial

    trial = create_trial(str(trial_dir))
    return min(step for name in trial.tensor_names() for step in trial.tensor(name).steps()
               if not np.all(np.isfinite(trial.tensor(name).value(step))))


def test_demo_stops_the_diverging_job_and_writes_the_report(tmp_path: Path, repo_env: dict[str, str]) -> None:
    result = subprocess.run([sys.executable, str(REPO / "examples" / "pytorch_diverge" / "demo.py"),
                             "--jobs-dir", str(tmp_path / "demo")], env=repo_env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    stopped = re.search(r"^  rule (\w+) stopped the job at step (\d+) \(TRAIN step (\d+)\)$", result.stdout,
                        flags=re.MULTILINE)
    assert stopped is not None, result.stdout
    rule, step, train_step = stopped.group(1), int(stopped.group(2)), int(stopped.group(3))
    assert rule in ("ExplodingTensor", "LossNotDecreasing")
    assert 40 < train_step <= 50  # the learning rate jumps at training step 40
    job_dir = Path(re.search(r"^  job directory: (.+)$", result.stdout, flags=re.MULTILINE).group(1))  # type: ignore[union-attr]
    if rule == "ExplodingTensor":  # it fires at the first step holding an inf or NaN
        assert step == first_non_finite_step(job_dir / "output" / "tensors")
    report = re.search(r"^  report: (.+)$", result.stdout, flags=re.MULTILINE)
    assert report is not None and Path(report.group(1)).is_file()
    html = Path(report.group(1)).read_text()
    assert f"Rule {rule} stopped the job at step {step} (TRAIN step {train_step})." in html
    assert html.count("<svg ") == 3
    # a training loop with validation passes: the losses of each mode are their own series over the global step
    assert "MSELoss_output_0 (TRAIN)" in html and "MSELoss_output_0 (EVAL)" in html
    modes = re.search(r"<th>modes</th><td>([^<]+)</td>", html)
    assert modes is not None and re.fullmatch(r"TRAIN: \d+ steps, EVAL: \d+ steps", modes.group(1))
