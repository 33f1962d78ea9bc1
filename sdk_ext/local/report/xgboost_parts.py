"""The report's XGBoost parts, shown only when a trial has them: the metrics that are not losses (auc,
map...: the losses chart already draws train and validation losses) and a feature-importance chart.

Feature importance is drawn as horizontal bars, one per feature, at the last saved step that has it:
the ``feature_importance/gain/*`` shares (else total_gain, weight, cover), else ``mean_abs_shap/*``
(else smdebug's signed ``average_shap/*``, by absolute value). Unused features (share 0) are listed too.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np

from sdk_ext.exceptions import SdkExtError
from sdk_ext.local.report.svg import PALETTE, Series

logger = logging.getLogger(__name__)

_SOURCES = (("feature_importance/gain/", "gain share"), ("feature_importance/total_gain/", "total gain share"),
            ("feature_importance/weight/", "split count share"), ("feature_importance/cover/", "cover share"),
            ("mean_abs_shap/", "mean |SHAP value|"), ("average_shap/", "|mean SHAP value|"))


@dataclass(frozen=True, slots=True)
class Importance:
    """Feature importance at one step, largest first."""

    label: str  # what the numbers are ("gain share")
    step: int
    values: list[tuple[str, float]]
    omitted: int = 0


def _value(trial: Any, name: str, step: int) -> float | None:
    try:
        array = np.asarray(trial.tensor(name).value(step), dtype=np.float64)
    except (SdkExtError, ValueError, TypeError) as err:
        logger.debug("report: %s at step %d unreadable: %s", name, step, err)
        return None
    return float(array.reshape(-1)[0]) if array.size == 1 else None


def metric_series(trial: Any, steps: Sequence[int], max_series: int) -> tuple[list[Series], int]:
    """Series of the ``metrics`` tensors that are not in ``losses`` (at most ``max_series``; the rest counted)."""
    collections = trial.collections()
    if "metrics" not in collections:
        return [], 0
    losses = set(collections["losses"].tensor_names) if "losses" in collections else set()
    names = sorted(n for n in collections["metrics"].tensor_names if n not in losses and trial.has_tensor(n))
    series = []
    for name in names[:max_series]:
        have = set(trial.tensor(name).steps())
        points = [(s, v) for s in steps if s in have and (v := _value(trial, name, s)) is not None]
        series.append(Series(name, [p[0] for p in points], [p[1] for p in points]))
    return series, max(0, len(names) - max_series)


def importance(trial: Any, max_bars: int = 20) -> Importance | None:
    """The feature importance to chart, or None if the trial has none."""
    every = trial.tensor_names()  # one listing; tensor_names(regex=...) would warn for each absent prefix
    for prefix, label in _SOURCES:
        names = [n for n in every if n.startswith(prefix)]
        if not names:
            continue
        step = max(s for n in names for s in trial.tensor(n).steps())
        values = []
        for name in names:
            v = _value(trial, name, step)
            values.append((name[len(prefix):], 0.0 if v is None else abs(v) if prefix == "average_shap/" else v))
        values.sort(key=lambda item: (-item[1], item[0]))
        return Importance(label, step, values[:max_bars], max(0, len(values) - max_bars))
    return None


def render_importance(data: Importance, width: int = 880) -> str:
    """Horizontal bars as one inline ``<svg>``."""
    row, label_w, value_w, top = 22, 220, 70, 6
    height = top * 2 + row * len(data.values)
    bar_w = width - label_w - value_w
    largest = max((v for _, v in data.values if math.isfinite(v)), default=0.0) or 1.0
    out = [(f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="feature importance ({escape(data.label)})">')]
    for i, (feature, value) in enumerate(data.values):
        y = top + i * row
        length = bar_w * value / largest if math.isfinite(value) and value > 0 else 0.0
        shown = feature if len(feature) <= 32 else feature[:31] + "…"
        text = f"{value * 100:.1f}%" if "share" in data.label else f"{value:.4g}"
        out.append(f'<g><title>{escape(feature)}: {escape(text)}</title>'
                   f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end" class="tick">{escape(shown)}</text>'
                   f'<rect x="{label_w}" y="{y + 3}" width="{length:.1f}" height="{row - 6}" fill="{PALETTE[0]}"/>'
                   f'<text x="{label_w + length + 6:.1f}" y="{y + 15}" class="tick">{escape(text)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def importance_html(data: Importance | None) -> str:
    """The report section, or "" when there is nothing to show."""
    if data is None:
        return ""
    more = f'<p class="note">and {data.omitted} less important features not drawn</p>' if data.omitted else ""
    return (f"<h2>Feature importance ({escape(data.label)}, step {data.step})</h2>"
            f"{render_importance(data)}{more}")


__all__ = ["Importance", "importance", "importance_html", "metric_series", "render_importance"]
