"""The HTML report of a trial and its job: one self-contained file (inline CSS and SVG, no scripts, no links).

    write_report("jobs/mnist-1", "jobs/mnist-1/report.html")   # a local job directory, or any trial path

It opens with the outcome (which rule stopped the job at which step, or that it completed clean, or
why it failed), then the rules' verdicts, the charts (losses, per-layer gradient and weight L2 norms
over steps, each rule that found issues marked at its step; for XGBoost, metrics that are not losses
and feature importance), and what was read (job and trial facts).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

from sdk_ext import __version__
from sdk_ext.local import svg
from sdk_ext.local.report_data import Panel, Progress, ReportData, collect
from sdk_ext.local.report_xgboost import importance_html

_STATUS_CLASS = {"IssuesFound": "bad", "Error": "bad", "Failed": "bad", "Stopped": "warn", "Stopping": "warn",
                 "NoIssuesFound": "good", "Completed": "good", "InProgress": "info"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:940px;color:#222}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.outcome{padding:12px 16px;border-radius:6px;margin:12px 0;font-size:16px}
.outcome.bad{background:#fdecea;border:1px solid #d62728} .outcome.good{background:#eaf7ea;border:1px solid #2ca02c}
.outcome.warn{background:#fff4e0;border:1px solid #ff7f0e} .outcome.info{background:#eef4fb;border:1px solid #1f77b4}
table{border-collapse:collapse;width:100%} td,th{text-align:left;padding:4px 8px;border-bottom:1px solid #eee;
vertical-align:top} th{width:190px;color:#555;font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;background:#777}
.badge.bad{background:#d62728} .badge.good{background:#2ca02c} .badge.warn{background:#ff7f0e}
.badge.info{background:#1f77b4} pre{white-space:pre-wrap;margin:0;font-size:12px}
.chart .title{font-size:14px;font-weight:600} .chart .axis{font-size:12px;fill:#444}
.chart .tick{font-size:11px;fill:#555} .chart .grid{stroke:#eee} .chart .mlabel{font-size:11px;font-weight:600}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:2px 0 18px 72px;font-size:12px}
.legend span:before{content:'';display:inline-block;width:14px;height:3px;margin:0 5px 3px 0;background:var(--c)}
.note{color:#666;font-size:12px} footer{margin-top:32px;color:#888;font-size:12px}
"""


def _badge(status: str) -> str:
    return f'<span class="badge {_STATUS_CLASS.get(status, "")}">{escape(status)}</span>'


def _when(value: Any) -> str:
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        except ValueError:
            return value
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return ""


def outcome(data: ReportData) -> tuple[str, str]:
    """(css class, one sentence): what happened to the job, in the words `make demo` prints too."""
    job = data.job or {}
    status = job.get("TrainingJobStatus")
    fired = [v for v in data.verdicts if v.status == "IssuesFound"]
    if data.stopped_by:
        rules = [r for d in data.stopped_by for r in d.get("rules", [])]
        steps = {v.rule: v.step for v in data.verdicts}
        parts = [f"rule {r} stopped the job at step {data.step_text(step)}" if (step := steps.get(r)) is not None
                 else f"rule {r} stopped the job" for r in dict.fromkeys(rules)]
        return "bad", "; ".join(parts)
    if status == "Failed":
        return "bad", f"the job failed: {(job.get('FailureReason') or '').splitlines()[0] if job.get('FailureReason') else ''}"
    if fired:
        names = ", ".join(f"{v.rule} at step {data.step_text(v.step)}" if v.step is not None else v.rule
                          for v in fired)
        where = f"; the job is {status}" if status else ""
        return "bad", f"rules found issues: {names}{where}"
    if status == "Stopped":
        return "warn", "the job was stopped; no rule found issues"
    if status == "Completed":
        clean = " and no rule found issues" if data.verdicts else ""
        return "good", f"the job completed{clean}"
    if status:
        return "info", f"the job is {status}"
    return "info", "no job information: the trial only"


def _step_cell(data: ReportData, step: int | None) -> str:
    if step is None:
        return ""
    mode = data.step_modes.get(step)
    return f'{step}<br><span class="note">{escape(mode[0])} step {mode[1]}</span>' if mode else str(step)


def _rules_table(data: ReportData) -> str:
    verdicts = data.verdicts
    if not verdicts:
        return '<p class="note">No Debugger rules ran for this job.</p>'
    rows = "".join(f"<tr><td>{escape(v.rule)}</td><td>{_badge(v.status)}</td><td>{_step_cell(data, v.step)}"
                   f"</td><td><pre>{escape(v.details.strip())}</pre></td></tr>" for v in verdicts)
    return f"<table><tr><th>rule</th><th>status</th><th>step</th><th>details</th></tr>{rows}</table>"


def _facts(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows if v) + "</table>"


def _chart(title: str, y_label: str, panel: Panel, markers: list[svg.Marker], empty: str,
           x_range: tuple[int, int] | None) -> str:
    if not panel.series:
        return f"<h2>{escape(title)}</h2><p class=\"note\">{escape(empty)}</p>"
    chart = svg.Chart(title=title, y_label=y_label + (" (log scale)" if panel.log_y else ""),
                      series=panel.series, markers=markers, log_y=panel.log_y, x_range=x_range)
    legend = "".join(f'<span style="--c:{svg.color(i)}">{escape(s.name)}</span>' for i, s in enumerate(panel.series))
    more = f'<p class="note">and {panel.omitted} more not drawn (sdk-ext trial lists them)</p>' if panel.omitted else ""
    return f"<h2>{escape(title)}</h2>{svg.render(chart)}<div class=\"legend\">{legend}</div>{more}"


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document."""
    job: Mapping[str, Any] = data.job or {}
    css_class, sentence = outcome(data)
    markers = [svg.Marker(v.step, f"{v.rule}: {v.status} @ {v.step}") for v in data.verdicts
               if v.step is not None and v.status == "IssuesFound"]
    steps = data.steps
    step_text = f"{len(steps)} saved ({steps[0]} to {steps[-1]})" if steps else "none"
    x_range = (steps[0], steps[-1]) if steps else None  # every chart spans the same steps
    saved = [f"{c} ({n})" for c, n in data.collections.items() if n]
    # an XGBoost trial has no gradients or weights to chart: no empty sections for them
    xgboost_only = (data.importance is not None or bool(data.metrics.series)) and not (
        data.gradients.series or data.weights.series)
    job_rows = [
        ("training job", escape(str(job.get("TrainingJobName", "")))),
        ("status", _badge(job["TrainingJobStatus"]) + f" {escape(str(job.get('SecondaryStatus', '')))}"
         if job.get("TrainingJobStatus") else ""),
        ("failure reason", f"<pre>{escape(job['FailureReason'])}</pre>" if job.get("FailureReason") else ""),
        ("created", _when(job.get("CreationTime"))),
        ("training started", _when(job.get("TrainingStartTime"))),
        ("training ended", _when(job.get("TrainingEndTime"))),
        ("stopped by", escape("; ".join(f"{d.get('reason')} ({d.get('time')})" for d in data.stopped_by))),
        ("job directory", escape(str((job.get("SdkExtLocal") or {}).get("JobDir", "")))),
    ]
    trial_rows = [
        ("trial", escape(data.trial_path)), ("steps", escape(step_text)),
        ("modes", escape(", ".join(f"{m}: {n} steps" for m, n in data.modes.items()))),
        ("workers", escape(", ".join(data.workers))), ("tensors", str(data.tensor_count)),
        ("collections", escape(", ".join(saved) if saved else "none with tensors")),
    ]
    body = [
        f"<h1>sdk_ext report: {escape(data.title)}</h1>",
        f'<div class="outcome {css_class}">{escape(sentence[0].upper() + sentence[1:])}.</div>',
        "<h2>Rules</h2>", _rules_table(data),
        _chart("Losses", "loss", data.losses, markers, "No loss tensors were saved (collection 'losses').", x_range),
        "" if xgboost_only else _chart("Gradient norms per layer", "L2 norm", data.gradients, markers,
                                       "No gradients were saved (collection 'gradients').", x_range),
        "" if xgboost_only else _chart("Weight norms per layer", "L2 norm", data.weights, markers,
                                       "No weights were saved (collection 'weights').", x_range),
        _chart("Metrics", "value", data.metrics, markers, "", x_range) if data.metrics.series else "",
        importance_html(data.importance),
        "<h2>Job</h2>" + _facts(job_rows) if job else "", "<h2>Trial</h2>" + _facts(trial_rows),
        (f"<footer>Written by sdk_ext {escape(__version__)} on "
         f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}. Red crosses on a chart's top edge: "
         "NaN or infinite values. Dashed lines: rules that found issues, at their step.</footer>"),
    ]
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>sdk_ext report: "
            f"{escape(data.title)}</title><style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")


def write_report(path: str | os.PathLike[str], out: str | os.PathLike[str], *,
                 job_file: str | os.PathLike[str] | None = None, progress: Progress | None = None,
                 max_series: int = 12, max_points: int = 400) -> ReportData:
    """Read ``path`` (a local job directory or a trial), write the report to ``out``; returns what it showed."""
    data = collect(path, job_file=job_file, progress=progress, max_series=max_series, max_points=max_points)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render_html(data), encoding="utf-8")
    os.replace(tmp, target)
    return data
