"""What a notebook user does: show a trial and a tensor, get a tensor's values as a DataFrame, draw a chart."""

from __future__ import annotations

import builtins
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.local.notebook import report_chart
from sdk_ext.local.report.html import CHARTS
from sdk_ext.modes import ModeKeys
from sdk_ext.trials import create_trial


@pytest.fixture
def trial_dir(tmp_path: Path) -> Path:
    """Steps 0-3 TRAIN, 4-5 EVAL; a loss, a gradient that is exactly 0 from step 2, a weight NaN at step 3."""
    out = tmp_path / "trial"
    hook = Hook(out, save_config=SaveConfig(save_interval=1), include_collections=["losses", "gradients", "weights"])
    for step in range(6):
        hook.set_mode(ModeKeys.TRAIN if step < 4 else ModeKeys.EVAL)
        with hook.step():
            hook.save_tensor("loss", np.float32(1.0 / (step + 1)), "losses")
            hook.save_tensor("gradient/fc.weight", np.zeros(4) if step >= 2 else np.full(4, 0.5), "gradients")
            w = np.full((2, 3), 0.5, dtype=np.float32)
            if step == 3:
                w[0, 0] = np.nan
            hook.save_tensor("fc.weight", w, "weights")
    hook.close()
    return out


def test_trial_and_tensor_show_themselves_as_html(trial_dir: Path) -> None:
    trial = create_trial(str(trial_dir))
    html = trial._repr_html_()
    assert "sdk_ext Trial" in html and "6 (0 to 5)" in html and "TRAIN: 4, EVAL: 2" in html
    assert "gradient/fc.weight" in html and "<script" not in html
    tensor_html = trial.tensor("fc.weight")._repr_html_()
    assert "sdk_ext Tensor" in tensor_html and "6 (0 to 5)" in tensor_html and "shape (2, 3)" in tensor_html


def test_tensor_to_dataframe_has_a_row_per_step_with_modes_and_statistics(trial_dir: Path) -> None:
    pytest.importorskip("pandas")
    trial = create_trial(str(trial_dir))
    loss = trial.tensor("loss").to_dataframe()
    assert list(loss.index) == [0, 1, 2, 3, 4, 5]
    assert list(loss["mode"]) == ["TRAIN"] * 4 + ["EVAL"] * 2 and list(loss["mode_step"]) == [0, 1, 2, 3, 0, 1]
    assert loss.loc[3, "value"] == pytest.approx(0.25)
    weights = trial.tensor("fc.weight").to_dataframe()
    assert weights.loc[3, "nan"] == 1 and weights.loc[2, "nan"] == 0
    assert weights.loc[2, "mean"] == pytest.approx(0.5) and weights.loc[2, "shape"] == (2, 3)
    grads = trial.tensor("gradient/fc.weight").to_dataframe()
    assert list(grads["zeros"]) == [0, 0, 4, 4]  # no gradients in EVAL steps
    evals = trial.tensor("loss").to_dataframe(mode=ModeKeys.EVAL)
    assert list(evals.index) == [0, 1] and list(evals["global_step"]) == [4, 5]


def test_to_dataframe_without_pandas_says_how_to_install_it(trial_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_pandas(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    tensor = create_trial(str(trial_dir)).tensor("loss")
    with pytest.raises(ImportError, match="pip install pandas"):
        tensor.to_dataframe()
    assert [r["step"] for r in tensor.rows()] == [0, 1, 2, 3, 4, 5]  # the same rows, no pandas needed


def test_one_chart_of_the_report_inline(trial_dir: Path) -> None:
    chart = report_chart(trial_dir, "gradients")
    html = chart._repr_html_()
    assert html.count("<svg") == 1 and "<script" not in html and "http" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert "Gradient norms per layer" in html and "gradient/fc.weight: 0 at step 2" in html
    assert re.search(r"Not on the axis: 2 values exactly 0", html)
    losses = report_chart(trial_dir, "losses")._repr_html_()
    assert "loss (TRAIN)" in losses and "loss (EVAL)" in losses
    with pytest.raises(ConfigError, match="choose one of " + ", ".join(CHARTS)):
        report_chart(trial_dir, "histograms")
