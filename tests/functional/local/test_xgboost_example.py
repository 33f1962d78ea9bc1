"""examples/xgboost_overfit end to end: an XGBoost script with no hook code overfits, `sdk-ext run --zero-change`
catches it with the Overfit rule, the handler stops it, and the report shows train/validation curves and
feature importance. Plus the report's XGBoost parts on a trial of every collection."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.local.report.html import write_report
from sdk_ext.trials import create_trial
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(importlib.util.find_spec("xgboost") is None, reason="needs the xgboost extra")


def first_overfit_step(trial_dir: Path, ratio: float = 1.0, patience: int = 3) -> int:
    """Where Overfit(ratio_threshold=ratio, patience=patience) must fire, computed from the saved losses."""
    trial = create_trial(str(trial_dir))
    strikes = 0
    for step in trial.steps():
        train = float(np.asarray(trial.tensor("train-rmse").value(step))[0])
        valid = float(np.asarray(trial.tensor("validation-rmse").value(step))[0])
        strikes = strikes + 1 if (valid - train) / train > ratio else 0
        if strikes >= patience:
            return step
    raise AssertionError("the saved losses never meet the rule's condition")


def test_the_overfitting_example_is_caught_and_stopped(tmp_path: Path, repo_env: dict[str, str]) -> None:
    result = subprocess.run([sys.executable, str(REPO / "examples" / "xgboost_overfit" / "demo.py"),
                             "--jobs-dir", str(tmp_path / "demo")], env=repo_env, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    stopped = re.search(r"^  rule Overfit stopped the job at step (\d+)$", result.stdout, flags=re.MULTILINE)
    assert stopped is not None, result.stdout
    job_dir = Path(re.search(r"^  job directory: (.+)$", result.stdout, flags=re.MULTILINE).group(1))  # type: ignore[union-attr]
    trial_dir = job_dir / "output" / "tensors"
    assert int(stopped.group(1)) == first_overfit_step(trial_dir)
    assert create_trial(str(trial_dir)).steps()[-1] < 299  # stopped well before the 300 rounds
    html = (job_dir / "report.html").read_text()
    assert f"Rule Overfit stopped the job at step {stopped.group(1)}." in html
    losses = html[html.index("<h2>Losses</h2>"):html.index("<h2>Feature importance")]
    assert "<title>train-rmse</title>" in losses and "<title>validation-rmse</title>" in losses
    bars = re.findall(r"<g><title>([^<:]+): ([\d.]+)%</title>", html)
    assert bars[0][0] in ("income", "tenure", "age") and len(bars) == 20  # 30 features, the top 20 drawn
    assert "and 10 less important features not drawn" in html
    assert "Gradient norms" not in html  # no empty PyTorch sections for an XGBoost trial


def test_report_draws_metrics_that_are_not_losses_and_unused_features(tmp_path: Path) -> None:
    from tests.functional.xgboost.jobs import train_job

    train_job(tmp_path / "t", "binary", rounds=5)
    data = write_report(tmp_path / "t", tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    assert {s.name for s in data.metrics.series} == {"train-auc", "train-aucpr", "validation-auc", "validation-aucpr"}
    assert "<h2>Metrics</h2>" in html
    assert data.importance is not None and data.importance.label == "gain share" and data.importance.step == 4
    shares = dict(data.importance.values)
    assert shares["flags"] == 0.0 and sum(shares.values()) == pytest.approx(1.0)
    assert "<g><title>flags: 0.0%</title>" in html
