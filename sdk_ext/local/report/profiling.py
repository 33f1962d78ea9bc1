"""The profiling part of a report (HTML, inline SVG, no scripts), its text summary (``sdk-ext profile``) and
ProfilerReport's own page (``profiler-report.html`` beside its rule reports).

What is shown is read by :mod:`sdk_ext.local.report.profiling_data`: utilization over time per host and
device, step durations with their outliers marked, and each profiler rule's verdict with what to try.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from html import escape
from pathlib import Path

from sdk_ext import __version__
from sdk_ext.local.report import svg
from sdk_ext.local.report.profiling_data import Line, ProfileData, ProfilerVerdict, Steps, collect_profile
from sdk_ext.rules.status import CHECKED_NOTHING, checked_nothing, reason

#: What each profiler rule checks, in one line.
CHECKS: dict[str, str] = {
    "LowGPUUtilization": "GPUs that are mostly idle (p95 utilization low) or swing between busy and idle.",
    "CPUBottleneck": "Moments when the GPU idles while a CPU core is saturated.",
    "IOBottleneck": "Moments when the GPU idles while the CPUs wait for I/O.",
    "GPUMemoryIncrease": "Sudden jumps of a GPU's memory use.",
    "BatchSize": "CPU, GPU and GPU memory all underused: the batch could be larger.",
    "LoadBalancing": "GPUs of one host that carry different workloads.",
    "OverallSystemUsage": "How busy each host was (report only; never finds issues).",
    "StepOutlier": "Steps far longer than the others (mean + stddev x standard deviation).",
    "MaxInitializationTime": "Training that has not reached its first step after threshold minutes.",
    "Dataloader": "Too few or too many dataloader processes for the host's cores.",
    "OverallFrameworkMetrics": "Where the framework's time went (report only; never finds issues).",
    "ProfilerReport": "Runs every profiler rule (its rows below) and reports once the job has ended.",
}

#: What to try when a profiler rule finds issues.
ADVICE: dict[str, str] = {
    "LowGPUUtilization": "Feed the GPUs faster (more dataloader workers, prefetching, a larger batch), or run on "
                         "a smaller instance or fewer GPUs.",
    "CPUBottleneck": "Take preprocessing off the training loop: more dataloader workers, prefetching, data "
                     "prepared once ahead of training, or augmentation on the GPU.",
    "IOBottleneck": "Read data faster: prefetch, copy the data set to local disk first, or use fewer, larger "
                    "files (sharded TFRecord, RecordIO, WebDataset).",
    "GPUMemoryIncrease": "Look for tensors kept across steps (a loss summed with its graph: use loss.item(); "
                         "growing caches or lists of outputs) and release them.",
    "BatchSize": "Raise the batch size (and scale the learning rate with it), or choose a smaller instance.",
    "LoadBalancing": "Give each GPU an equal share: DistributedDataParallel instead of DataParallel, evenly "
                     "sized shards of data.",
    "StepOutlier": "Find what the slow steps do (the timeline in profiler-output/framework opens in Perfetto): a "
                   "periodic checkpoint or evaluation, garbage collection, a data loading stall.",
    "MaxInitializationTime": "Shorten the start: prepare or download data before training (FastFile or Pipe "
                             "input), cache compiled models; or check that the hook records steps.",
    "Dataloader": "Set the DataLoader's num_workers near the number of CPU cores (and pin_memory=True when "
                  "training on GPUs).",
}

_STATUS_CLASS = {"IssuesFound": "bad", "Error": "bad", "Stopped": "warn", "NoIssuesFound": "good",
                 "InProgress": "info"}
GPU_RED = "#d62728"

PAGE_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:24px auto;max-width:940px;color:#222}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px} table{border-collapse:collapse;width:100%}
td,th{text-align:left;padding:4px 8px;border-bottom:1px solid #eee;vertical-align:top} th{color:#555;font-weight:600}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;background:#777}
.badge.bad{background:#d62728} .badge.good{background:#2ca02c} .badge.warn{background:#ff7f0e}
.badge.info{background:#1f77b4} pre{white-space:pre-wrap;margin:0;font-size:12px} .note{color:#666;font-size:12px}
.advice{margin:4px 0 0;font-size:13px} footer{margin-top:32px;color:#888;font-size:12px}
"""
PROFILE_CSS = "tr.sub td:first-child{padding-left:24px} .numbers td{text-align:right} .numbers td:first-child{text-align:left}"


def _badge(status: str, details: str) -> str:
    if status == "NoIssuesFound" and checked_nothing(details):
        return '<span class="badge warn">checked nothing</span>'
    return f'<span class="badge {_STATUS_CLASS.get(status, "")}">{escape(status)}</span>'


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def _utc(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _why(v: ProfilerVerdict) -> str:
    text = reason(v.details) if v.parent is None else v.details
    return text[len(CHECKED_NOTHING):].strip() if checked_nothing(v.details) else text


def _rule_name(v: ProfilerVerdict) -> str:
    return v.rule if v.rule in CHECKS else next((k for k in CHECKS if v.rule.startswith(k)), v.rule)


def rules_html(verdicts: list[ProfilerVerdict]) -> str:
    if not verdicts:
        return '<p class="note">No profiler rules ran for this job.</p>'
    rows = []
    for v in verdicts:
        rule = _rule_name(v)
        parts = [f"<pre>{escape(_why(v))}</pre>"]
        if v.status == "IssuesFound" and rule in ADVICE:
            parts.append(f'<p class="advice">What to try: {escape(ADVICE[rule])}</p>')
        if rule in CHECKS:
            parts.append(f'<p class="note">Checks: {escape(CHECKS[rule])}</p>')
        css = ' class="sub"' if v.parent else ""
        rows.append(f"<tr{css}><td>{escape(v.rule)}</td><td>{_badge(v.status, v.details)}</td>"
                    f"<td>{''.join(parts)}</td></tr>")
    return f"<table><tr><th>rule</th><th>status</th><th>details</th></tr>{''.join(rows)}</table>"


def _legend(series: list[svg.Series]) -> str:
    spans = "".join(f'<span style="--c:{s.color or svg.color(i)}">{escape(s.name)}</span>' for i, s in enumerate(series))
    return f'<div class="legend">{spans}</div>'


def _chart(title: str, y_label: str, lines: list[svg.Series], *, x_label: str, x_whole: bool,
           y_range: tuple[float, float] | None = None, log_y: bool = False) -> str:
    chart = svg.Chart(title=title, y_label=y_label, series=lines, x_label=x_label, x_whole=x_whole, y_range=y_range,
                      log_y=log_y, height=260)
    return svg.render(chart) + _legend(lines)


def _series(line: Line, **extra: object) -> svg.Series:
    return svg.Series(line.name, line.x, line.values, **extra)  # type: ignore[arg-type]


def _steps_html(steps: Steps) -> str:
    stats = steps.stats
    lines = [_series(steps.line)]
    if steps.outlier_line.x:
        lines.append(_series(steps.outlier_line, dots=True, color=GPU_RED))
    values = [v for v in steps.line.values if v > 0]
    log_y = bool(values) and max(values) / min(values) > 50
    shown = ", ".join(str(s) for s in steps.outliers[:12]) + (" ..." if len(steps.outliers) > 12 else "")
    note = (f"{steps.count} steps: mean {_duration(stats['mean'])}, median {_duration(stats['p50'])}, p95 "
            f"{_duration(stats['p95'])}, max {_duration(stats['max'])}. "
            + (f"{len(steps.outliers)} outliers (longer than {_duration(steps.limit)}): steps {shown}."
               if steps.outliers else f"No step longer than {_duration(steps.limit)}."))
    title = f"Step durations: {steps.phase.split('.')[-1]} on {steps.node}"
    return (f"<h3>{escape(title)}</h3>"
            + _chart(title, "duration (ms)" + (" (log scale)" if log_y else ""), lines, x_label="step",
                     x_whole=True, log_y=log_y)
            + f'<p class="note">{escape(note)}</p>')


def _usage_table(data: ProfileData) -> str:
    rows = []
    for host, usage in data.usage.items():
        for label, stats in usage.items():
            rows.append(f"<tr><td>{escape(host)}: {escape(label)}</td><td>{stats['p50']:.1f}</td>"
                        f"<td>{stats['p95']:.1f}</td><td>{stats['max']:.1f}</td></tr>")
    if not rows:
        return ""
    return ('<table class="numbers"><tr><th>utilization (%)</th><th>p50</th><th>p95</th><th>max</th></tr>'
            + "".join(rows) + "</table>")


def facts(data: ProfileData) -> list[tuple[str, str]]:
    hosts = ", ".join(f"{h} ({c['cores']} cores, {c['gpus']} GPUs)" for h, c in data.hosts.items())
    span = ""
    if data.start_s is not None and data.end_s is not None:
        span = f"{_utc(data.start_s)} to {_utc(data.end_s)} ({_duration(data.end_s - data.start_s)})"
    init = data.initialization_s
    return [
        ("profiler output", data.path),
        ("hosts", hosts),
        ("sampled", span),
        ("sampling interval", f"{data.interval_ms:g} ms" if data.interval_ms else ""),
        ("system records", str(data.records) if data.records else ""),
        ("first step", f"{_duration(init)} after the first sample" if init is not None else
         ("no step timeline (the hooks record steps when profiling is on)" if data.has_data else "")),
    ]


def profiling_html(data: ProfileData) -> str:
    """The profiling section (``<h2>Profiling</h2>`` and what follows)."""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts(data) if v)
    parts = ["<h2>Profiling</h2>", f"<table>{rows}</table>", "<h3>Profiler rules</h3>", rules_html(data.verdicts)]
    if not data.has_data:
        parts.append('<p class="note">The job saved no profiler data (ProfilerConfig with DisableProfiler false '
                     "turns the system monitor and the step timeline on; sdk-ext run --profile).</p>")
        return "".join(parts)
    for host, lines in data.utilization.items():
        title = f"Utilization on {host}"
        parts.append(f"<h3>{escape(title)}</h3>")
        parts.append(_chart(title, "percent", [_series(line) for line in lines],
                            x_label="seconds since the first sample", x_whole=False, y_range=(0.0, 100.0)))
    parts.append(_usage_table(data))
    if data.steps:
        parts.extend(_steps_html(s) for s in data.steps)
    else:
        parts.append('<p class="note">No step timeline: the hooks record step durations when profiling is on '
                     "(framework/pevents).</p>")
    return "".join(parts)


def summary_lines(data: ProfileData) -> list[str]:
    """``sdk-ext profile``'s text: facts, utilization, steps, rules."""
    out = [f"profiler output {data.path}"]
    if not data.has_data:
        return [*out, "  no profiler data (system/ and framework/ hold no records)"]
    for key, value in facts(data)[1:]:
        if value:
            out.append(f"  {key}: {value}")
    for host, usage in data.usage.items():
        for label, stats in usage.items():
            out.append(f"  {host} {label}: p50 {stats['p50']:.0f}%, p95 {stats['p95']:.0f}%, max {stats['max']:.0f}%")
    for s in data.steps:
        st = s.stats
        outliers = (f"{len(s.outliers)} outliers (> {_duration(s.limit)}): steps "
                    f"{', '.join(str(n) for n in s.outliers[:10])}{' ...' if len(s.outliers) > 10 else ''}"
                    if s.outliers else "no outliers")
        out.append(f"  steps {s.phase.split('.')[-1]} on {s.node}: {s.count}, mean {_duration(st['mean'])}, median "
                   f"{_duration(st['p50'])}, p95 {_duration(st['p95'])}, max {_duration(st['max'])}; {outliers}")
    if not data.steps:
        out.append("  steps: no step timeline")
    for v in data.verdicts:
        indent = "    " if v.parent else "  "
        why = _why(v)
        out.append(f"{indent}rule {v.rule}: {v.status}" + (f" ({why})" if why else ""))
        if v.status == "IssuesFound" and _rule_name(v) in ADVICE:
            out.append(f"{indent}  what to try: {ADVICE[_rule_name(v)]}")
    return out


def write_profiler_page(profiler_data: str, reports_dir: Path, out: str | os.PathLike[str]) -> Path:
    """ProfilerReport's ``profiler-report.html``: the profiling part for the data at ``profiler_data``, its
    verdicts from the rule reports in ``reports_dir``; written atomically."""
    data = collect_profile(profiler_data, reports_dir=reports_dir)
    page = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Profiler report</title>"
            f"<style>{PAGE_CSS}{svg_css()}{PROFILE_CSS}</style></head><body><h1>Profiler report</h1>"
            f"{profiling_html(data)}<footer>Written by sdk_ext {escape(__version__)} (ProfilerReport) on "
            f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}.</footer></body></html>\n")
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, target)
    return target


def svg_css() -> str:
    from sdk_ext.local.report.html import CHART_CSS

    return CHART_CSS


__all__ = ["ADVICE", "CHECKS", "PROFILE_CSS", "facts", "profiling_html", "rules_html", "summary_lines",
           "write_profiler_page"]
