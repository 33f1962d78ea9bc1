"""The report of a job that ran TRAIN steps with EVAL passes: one loss series per mode, x = global step."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from sdk_ext.local.report.data import Verdict, collect, modes_of_steps
from sdk_ext.local.report.html import render_html
from sdk_ext.trials import create_trial
from tests.functional.rules.trial_writer import write_trial


def train_with_eval(path: Path) -> Path:
    steps = []
    for block in range(3):  # 4 TRAIN steps, then 2 EVAL steps
        for i in range(4):
            g = 7 * block + i
            steps.append((g, {"loss": np.float32(10 - g * 0.1), "gradient/w": np.full(3, 0.5), "w.weight": np.ones(3)},
                          "TRAIN"))
        for i in range(2):
            g = 7 * block + 4 + i
            steps.append((g, {"loss": np.float32(11 - g * 0.1), "w.weight": np.ones(3)}, "EVAL"))
    return write_trial(path, steps)


def test_losses_are_one_series_per_mode_over_global_steps(tmp_path: Path) -> None:
    trial = train_with_eval(tmp_path / "trial")
    data = collect(trial)
    assert [s.name for s in data.losses.series] == ["loss (TRAIN)", "loss (EVAL)"]
    train, evaluation = data.losses.series
    assert list(train.steps) == [0, 1, 2, 3, 7, 8, 9, 10, 14, 15, 16, 17]
    assert list(evaluation.steps) == [4, 5, 11, 12, 18, 19]
    assert evaluation.values[0] == np.float32(11 - 0.4)
    assert [s.name for s in data.weights.series] == ["w.weight"]  # norms stay one line across modes
    assert data.modes == {"TRAIN": 12, "EVAL": 6}
    html = render_html(data)
    assert "loss (TRAIN)" in html and "loss (EVAL)" in html


def test_every_chart_spans_the_same_steps_and_verdicts_name_their_mode_step(tmp_path: Path) -> None:
    trial = train_with_eval(tmp_path / "trial")
    data = collect(trial)
    data.verdicts = [Verdict("LossRule", "IssuesFound", 11, "fired")]
    data.step_modes = modes_of_steps(create_trial(str(trial)), [11])
    assert data.step_modes == {11: ("EVAL", 2)}
    html = render_html(data)
    assert "Rules found issues: LossRule at step 11 (EVAL step 2)." in html
    charts = re.findall(r"<svg .*?</svg>", html, flags=re.DOTALL)
    assert len(charts) == 3
    # gradients end at step 17 (TRAIN only), yet step 15 sits at the same x on all three charts
    x_of_15 = {re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="middle" class="tick">15</text>', c)[0]
               for c in charts}
    assert len(x_of_15) == 1
