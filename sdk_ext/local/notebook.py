"""One chart of the report, inline in a notebook (the same SVG as report.html; no scripts, no files).

    from sdk_ext.local.notebook import report_chart
    report_chart("sdk-ext-jobs/mnist-1", "gradients")      # a job directory or a trial path (s3:// too)

Charts: ``losses``, ``gradients`` (L2 norm per layer), ``weights``, ``scalars``, ``metrics`` (XGBoost's
auc, error...); each with the rules' verdicts marked at their step when the path is a local job
directory (or ``job_file=`` is given).
For the values themselves: ``trial.tensor(name).to_dataframe()`` (sdk_ext.trials.display).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.report.data import collect
from sdk_ext.local.report.html import CHART_CSS, CHARTS, chart_html, verdict_markers


@dataclass(frozen=True, slots=True)
class InlineChart:
    """HTML holding one inline SVG chart; Jupyter shows it through ``_repr_html_``."""

    html: str

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html


def report_chart(path: str | os.PathLike[str], chart: str = "losses", *,
                 job_file: str | os.PathLike[str] | None = None, max_series: int = 12, max_points: int = 400,
                 trial_timeout: float = 5.0) -> InlineChart:
    """The report's ``chart`` for ``path`` (a local job directory, a trial directory or an ``s3://`` prefix).

    Raises:
        ConfigError: ``chart`` is not one of the report's charts.
        MissingCollectionFiles: nothing was saved at ``path``.
    """
    if chart not in CHARTS:
        raise ConfigError(f"chart {chart!r}: choose one of {', '.join(CHARTS)}", where="report_chart")
    data = collect(path, job_file=job_file, max_series=max_series, max_points=max_points, trial_timeout=trial_timeout)
    title, y_label, field_name, empty = CHARTS[chart]
    x_range = (data.steps[0], data.steps[-1]) if data.steps else None
    body = chart_html(title, y_label, getattr(data, field_name), verdict_markers(data), empty, x_range)
    return InlineChart(f"<div><style>{CHART_CSS}</style>{body}</div>")


__all__ = ["InlineChart", "report_chart"]
