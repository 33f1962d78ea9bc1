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
from sdk_ext.local.report import svg
from sdk_ext.local.report.data import Panel, Progress, ReportData, Verdict, collect
from sdk_ext.local.report.profiling import PROFILE_CSS, profiling_html
from sdk_ext.local.report.xgboost_parts import importance_html
from sdk_ext.rules.status import checked_nothing, checked_partly, coverage_gap, reason

#: What to try when a built-in rule finds issues: one line each.
ADVICE: dict[str, str] = {
    "AllZero": "Check the input pipeline and the layer that feeds this tensor; an all-zero tensor often means "
               "empty batches or a dead layer.",
    "CheckInputImages": "Normalise the inputs (zero mean, unit variance per channel) before the first layer.",
    "ClassImbalance": "Resample or weight the classes (weighted loss, oversampling the rare ones).",
    "Confusion": "Look at the classes that are confused most; more or cleaner data for them, or class weights.",
    "DeadRelu": "Lower the learning rate, use He initialisation, or try LeakyReLU so that units can recover.",
    "ExplodingTensor": "Lower the learning rate, clip gradients (torch.nn.utils.clip_grad_norm_), and check the "
                       "inputs and the loss for NaN or division by zero.",
    "FeatureImportanceOverweight": "One feature dominates: check it for target leakage, or regularise the trees.",
    "LossNotDecreasing": "Check the learning rate (too low or too high), that the optimizer steps, and that the "
                         "loss is computed on the right outputs and labels.",
    "NLPSequenceRatio": "Check tokenisation and padding: too many padding or unknown tokens in the inputs.",
    "Overfit": "Regularise (dropout, weight decay), augment the data, or stop earlier.",
    "Overtraining": "Stop training earlier (early stopping on the validation loss).",
    "PoorWeightInitialization": "Use an initialisation suited to the activation (He for ReLU, Xavier for tanh).",
    "SaturatedActivation": "Normalise the inputs, lower the learning rate, or use batch normalisation before "
                           "tanh/sigmoid layers.",
    "SimilarAcrossRuns": "The runs differ: compare their hyperparameters, data order and seeds.",
    "StalledTrainingRule": "Training stopped writing steps: check the training log for a hang (data loading, "
                           "a deadlock between workers).",
    "TensorVariance": "Lower the learning rate or add normalisation; the tensor's variance is out of range.",
    "TreeDepth": "Limit max_depth or add regularisation (min_child_weight, gamma).",
    "UnchangedTensor": "Check that the optimizer steps and the parameters require gradients; raise the learning "
                       "rate if it is too small.",
    "VanishingGradient": "Use ReLU-like activations, residual connections or batch normalisation; check the "
                         "initialisation and raise the learning rate.",
    "WeightUpdateRatio": "Tune the learning rate: updates far larger or smaller than the weights.",
}

_STATUS_CLASS = {"IssuesFound": "bad", "Error": "bad", "Failed": "bad", "Stopped": "warn", "Stopping": "warn",
                 "NoIssuesFound": "good", "Completed": "good", "InProgress": "info"}

#: The charts' styles (the report's, and a notebook's inline chart, which must not restyle the page).
CHART_CSS = (".chart .title{font-size:14px;font-weight:600} .chart .axis{font-size:12px;fill:#444}"
             ".chart .tick{font-size:11px;fill:#555} .chart .grid{stroke:#eee} .chart .mlabel{font-size:11px;"
             "font-weight:600} .legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:2px 0 18px 72px;font-size:12px}"
             ".legend span:before{content:'';display:inline-block;width:14px;height:3px;margin:0 5px 3px 0;"
             "background:var(--c)} .offnote{margin:0 0 14px 72px;font-size:12px;color:#a33}")

_CSS = CHART_CSS + """
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
.note{color:#666;font-size:12px} footer{margin-top:32px;color:#888;font-size:12px}
.advice{margin:4px 0 0;font-size:13px}
.nodata{padding:10px 14px;border-radius:6px;background:#fdecea;border:1px solid #d62728;margin:8px 0}
pre.log{background:#f6f6f6;border:1px solid #ddd;padding:8px;font-size:11px;max-height:480px;overflow:auto}
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
    if data.profile is not None:  # a profiler rule that found issues (its configuration, not ProfilerReport's parts)
        fired += [Verdict(v.rule, v.status, None, v.details) for v in data.profile.verdicts
                  if v.parent is None and v.status == "IssuesFound"]
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
    if data.no_data:
        ran = status.lower() if status else "ran"
        return "bad", f"the job {ran} but saved no debugging data, so no rule checked anything"
    errors = [v.rule for v in data.verdicts if v.status == "Error"]
    unchecked = [v.rule for v in data.verdicts if v.status == "NoIssuesFound" and checked_nothing(v.details)]
    partly = [v.rule for v in data.verdicts if v.status == "NoIssuesFound" and checked_partly(v.details)]
    if errors or unchecked or partly:
        parts = ([f"rules ended in Error: {', '.join(errors)}"] if errors else []) + \
            ([f"rules checked nothing: {', '.join(unchecked)}"] if unchecked else []) + \
            ([f"rules checked only part: {', '.join(partly)}"] if partly else [])
        return "warn", f"the job is {status or 'unknown'}, but not every rule checked it: " + "; ".join(parts)
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


def _rule_of(data: ReportData, verdict: Verdict) -> str:
    """The built-in rule a configuration runs (its ``rule_to_invoke``), else the configuration's name."""
    return (data.rule_parameters.get(verdict.rule) or {}).get("rule_to_invoke") or verdict.rule


def _verdict_cell(data: ReportData, v: Verdict) -> str:
    params = {k: p for k, p in (data.rule_parameters.get(v.rule) or {}).items() if k != "rule_to_invoke"}
    gap = coverage_gap(v.details)
    why = gap[1] if gap else reason(v.details)
    parts = [f"<pre>{escape(why)}</pre>"]
    advice = ADVICE.get(_rule_of(data, v))
    if v.status == "IssuesFound" and advice:
        parts.append(f'<p class="advice">What to try: {escape(advice)}</p>')
    if params:
        parts.append('<p class="note">parameters: ' + escape(", ".join(f"{k}={p}" for k, p in params.items()))
                     + "</p>")
    return "".join(parts)


def _rules_table(data: ReportData) -> str:
    verdicts = data.verdicts
    if not verdicts:
        return '<p class="note">No Debugger rules ran for this job.</p>'
    rows = []
    for v in verdicts:
        badge = _badge(v.status)
        gap = coverage_gap(v.details)
        if gap:
            badge = f'<span class="badge warn">{gap[0]}</span>'
        rows.append(f"<tr><td>{escape(v.rule)}</td><td>{badge}</td><td>{_step_cell(data, v.step)}</td>"
                    f"<td>{_verdict_cell(data, v)}</td></tr>")
    return f"<table><tr><th>rule</th><th>status</th><th>step</th><th>details</th></tr>{''.join(rows)}</table>"


def _facts(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows if v) + "</table>"


def chart_html(title: str, y_label: str, panel: Panel, markers: list[svg.Marker], empty: str,
           x_range: tuple[int, int] | None) -> str:
    if not panel.series:
        return f"<h2>{escape(title)}</h2><p class=\"note\">{escape(empty)}</p>"
    chart = svg.Chart(title=title, y_label=y_label + (" (log scale)" if panel.log_y else ""),
                      series=panel.series, markers=markers, log_y=panel.log_y, x_range=x_range)
    legend = "".join(f'<span style="--c:{svg.color(i)}">{escape(s.name)}</span>' for i, s in enumerate(panel.series))
    more = f'<p class="note">and {panel.omitted} more not drawn (sdk-ext trial lists them)</p>' if panel.omitted else ""
    return f"<h2>{escape(title)}</h2>{svg.render(chart)}<div class=\"legend\">{legend}</div>{_off_note(panel)}{more}"


def _off_note(panel: Panel) -> str:
    """The values the chart cannot place on its axis, counted (they are marked on its edges)."""
    off = svg.off_chart(panel.series, log_y=panel.log_y)
    if not off:
        return ""
    parts = []
    if off.zero:
        parts.append(f"{off.zero} values exactly 0 (rings on the bottom edge: a log axis has no 0)")
    if off.negative:
        parts.append(f"{off.negative} negative values (rings on the bottom edge)")
    if off.nan:
        parts.append(f"{off.nan} NaN values (red crosses on the top edge)")
    if off.inf:
        parts.append(f"{off.inf} infinite values (red crosses on the top edge)")
    return f'<p class="offnote">Not on the axis: {escape("; ".join(parts))}.</p>'


def verdict_markers(data: ReportData) -> list[svg.Marker]:
    """A marker at the step of each rule that found issues (on every chart)."""
    return [svg.Marker(v.step, f"{v.rule}: {v.status} @ {v.step}") for v in data.verdicts
            if v.step is not None and v.status == "IssuesFound"]


#: The report's charts: name -> (title, y label, the ReportData field, what to say when it is empty)
CHARTS: dict[str, tuple[str, str, str, str]] = {
    "losses": ("Losses", "loss", "losses", "No loss tensors were saved (collection 'losses')."),
    "gradients": ("Gradient norms per layer", "L2 norm", "gradients",
                  "No gradients were saved (collection 'gradients')."),
    "weights": ("Weight norms per layer", "L2 norm", "weights", "No weights were saved (collection 'weights')."),
    "scalars": ("Saved scalars", "value", "scalars", "No scalars were saved (hook.save_scalar)."),
    # metrics that are not losses (XGBoost: auc, error...)
    "metrics": ("Metrics", "value", "metrics", "No metrics other than losses were saved (collection 'metrics')."),
}


def _log_tail(data: ReportData) -> str:
    if not data.log_tail:
        return ""
    return (f"<h2>Training log (last {len(data.log_tail)} lines)</h2>"
            f'<pre class="log">{escape(chr(10).join(data.log_tail))}</pre>')


def render_html(data: ReportData) -> str:
    """The whole report as one HTML document."""
    job: Mapping[str, Any] = data.job or {}
    css_class, sentence = outcome(data)
    markers = verdict_markers(data)
    steps = data.steps
    step_text = f"{len(steps)} saved ({steps[0]} to {steps[-1]})" if steps else "none"
    x_range = (steps[0], steps[-1]) if steps else None  # every chart spans the same steps
    saved = [f"{c} ({n})" for c, n in data.collections.items() if n]
    # an XGBoost trial has no gradients or weights to chart: no empty sections for them
    xgboost_only = (data.importance is not None or bool(data.metrics.series)) and not (
        data.gradients.series or data.weights.series)
    # a job that profiled but saved no tensors (and ran no Debugger rule): no empty tensor charts
    profile_only = data.profile is not None and not data.steps and not data.verdicts
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
        (f'<div class="nodata"><b>No debugging data was saved.</b> {escape(data.no_data)}</div>'
         if data.no_data else ""),
        "<h2>Rules</h2>", _rules_table(data),
        _log_tail(data),
        profiling_html(data.profile) if data.profile is not None else "",
        *(chart_html(title, y_label, getattr(data, field_name), markers, empty, x_range)
          for key, (title, y_label, field_name, empty) in CHARTS.items()
          if (key not in ("scalars", "metrics") or getattr(data, field_name).series)
          and not (xgboost_only and key in ("gradients", "weights"))
          and not profile_only),
        importance_html(data.importance),
        "<h2>Job</h2>" + _facts(job_rows) if job else "",
        "" if profile_only else "<h2>Trial</h2>" + _facts(trial_rows),
        (f"<footer>Written by sdk_ext {escape(__version__)} on "
         f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}. Red crosses on a chart's top edge: "
         "NaN or infinite values; rings on the bottom edge of a log axis: zeros. Dashed lines: rules that found "
         "issues, at their step.</footer>"),
    ]
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>sdk_ext report: "
            f"{escape(data.title)}</title><style>{_CSS}{PROFILE_CSS}</style></head><body>{''.join(body)}</body></html>\n")


def write_report(path: str | os.PathLike[str], out: str | os.PathLike[str], *,
                 job_file: str | os.PathLike[str] | None = None, progress: Progress | None = None,
                 max_series: int = 12, max_points: int = 400, trial_timeout: float = 5.0) -> ReportData:
    """Read ``path`` (a local job directory or a trial), write the report to ``out``; returns what it showed."""
    data = collect(path, job_file=job_file, progress=progress, max_series=max_series, max_points=max_points,
                   trial_timeout=trial_timeout)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(render_html(data), encoding="utf-8")
    os.replace(tmp, target)
    return data
