"""Line charts as inline SVG text: no JavaScript, no fonts or files to fetch, readable in any browser.

A chart plots series of (global step, value) points on a linear or log10 y axis. A value that is NaN or
infinite breaks its line and is drawn as a red cross on the top edge (the plot's way of saying
"the value left the chart here"); on a log axis a value that is exactly zero (or negative) cannot be
placed either: it breaks the line and is drawn as a ring on the bottom edge, in the series' colour.
:func:`off_chart` counts both, for the note under the chart. Markers draw a labelled vertical line at
a step (a rule verdict); labels that would overlap go on rows below each other. Hovering a line, a
point off the chart or a marker shows its ``<title>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#393b79", "#637939", "#8c6d31")
NON_FINITE = "#d62728"


@dataclass(frozen=True, slots=True)
class Series:
    """One line: ``values[i]`` at ``steps[i]`` (``dots``: points only, no line between them)."""

    name: str
    steps: Sequence[float]
    values: Sequence[float]
    dots: bool = False
    color: str | None = None  # default: the palette's, by the series' place in the chart


@dataclass(frozen=True, slots=True)
class Marker:
    """A vertical line at ``step`` with a label (e.g. a rule that found issues there)."""

    step: int
    label: str
    color: str = NON_FINITE


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    y_label: str
    series: Sequence[Series]
    markers: Sequence[Marker] = field(default_factory=tuple)
    log_y: bool = False
    x_range: tuple[float, float] | None = None  # steps the x axis spans at least (to line up several charts)
    width: int = 880
    height: int = 300
    x_label: str = "global step"
    x_whole: bool = True  # x is a count (steps): ticks only at whole numbers
    y_range: tuple[float, float] | None = None  # the y axis spans at least this (percentages: 0 to 100)


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


@dataclass(frozen=True, slots=True)
class OffChart:
    """Values a chart could not place on its axis: NaN, infinite, and (log axis) zero or negative."""

    nan: int = 0
    inf: int = 0
    zero: int = 0  # exactly zero, on a log axis
    negative: int = 0  # on a log axis

    def __bool__(self) -> bool:
        return bool(self.nan or self.inf or self.zero or self.negative)


def off_chart(series: Sequence[Series], *, log_y: bool) -> OffChart:
    nan = sum(1 for s in series for v in s.values if math.isnan(v))
    inf = sum(1 for s in series for v in s.values if math.isinf(v))
    zero = sum(1 for s in series for v in s.values if log_y and v == 0) if log_y else 0
    negative = sum(1 for s in series for v in s.values if log_y and math.isfinite(v) and v < 0) if log_y else 0
    return OffChart(nan, inf, zero, negative)


LABEL_CHAR_PX = 6.6  # width of one character of a marker label (11px bold sans), for overlap tests
LABEL_ROW_PX = 14


def label_rows(xs: Sequence[tuple[float, float]]) -> list[int]:
    """For labels spanning ``(x0, x1)`` pixels, in drawing order: the row each goes on, so none overlap."""
    rows: list[list[tuple[float, float]]] = []
    out = []
    for x0, x1 in xs:
        row = next((i for i, taken in enumerate(rows) if all(x1 + 4 < a or x0 > b + 4 for a, b in taken)), len(rows))
        if row == len(rows):
            rows.append([])
        rows[row].append((x0, x1))
        out.append(row)
    return out


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round tick values covering [low, high] (1, 2 or 5 times a power of ten apart)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step)
    ticks = []
    i = first
    while i * step <= high + step * 1e-9:
        ticks.append(round(i * step, 12) + 0.0)
        i += 1
    return ticks


def fmt(value: float) -> str:
    """A short tick label."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e5 or magnitude < 1e-3:
        return f"{value:.0e}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
    return f"{value:.6g}"


def _y_range(values: list[float], log_y: bool) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    low, high = min(values), max(values)
    if log_y:
        low, high = math.floor(low), math.ceil(high)
        return (low, high) if high > low else (low - 1, high + 1)
    if high == low:
        pad = abs(low) * 0.1 or 1.0
        return low - pad, high + pad
    pad = (high - low) * 0.05
    return low - pad, high + pad


def render(chart: Chart) -> str:
    """The chart as one ``<svg>`` element (no XML declaration, no namespace URL needed inline in HTML)."""
    left, right, top, bottom = 72, 16, 12, 36
    w, h = chart.width, chart.height
    pw, ph = w - left - right, h - top - bottom
    steps = [s for series in chart.series for s in series.steps] + [m.step for m in chart.markers]
    steps += list(chart.x_range or ())
    x_low, x_high = (min(steps), max(steps)) if steps else (0, 1)
    if x_high == x_low:
        x_high = x_low + 1

    def y_of(v: float) -> float | None:
        if not math.isfinite(v):
            return None
        if chart.log_y:
            return math.log10(v) if v > 0 else None
        return v

    plotted = [y for s in chart.series for v in s.values if (y := y_of(v)) is not None]
    y_low, y_high = _y_range(plotted + [y for v in chart.y_range or () if (y := y_of(v)) is not None], chart.log_y)

    def px(step: float) -> float:
        return left + (step - x_low) / (x_high - x_low) * pw

    def py(y: float) -> float:
        return top + ph - (y - y_low) / (y_high - y_low) * ph

    out = [(f'<svg class="chart" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
            f'aria-label="{escape(chart.title)}">'),
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fff" stroke="#999"/>',
           (f'<text transform="translate(14 {top + ph / 2}) rotate(-90)" text-anchor="middle" class="axis">'
            f'{escape(chart.y_label)}</text>'),
           f'<text x="{left + pw / 2}" y="{h - 4}" text-anchor="middle" class="axis">{escape(chart.x_label)}</text>']
    for tick in nice_ticks(x_low, x_high, 8):
        if x_low <= tick <= x_high and (float(tick).is_integer() or not chart.x_whole):
            x = px(tick)
            label = str(int(tick)) if float(tick).is_integer() else fmt(tick)
            out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" class="grid"/>'
                       f'<text x="{x:.1f}" y="{top + ph + 14}" text-anchor="middle" class="tick">{label}</text>')
    y_ticks = [float(t) for t in range(int(y_low), int(y_high) + 1)] if chart.log_y else nice_ticks(y_low, y_high)
    if chart.log_y and len(y_ticks) > 8:
        stride = math.ceil(len(y_ticks) / 8)
        y_ticks = y_ticks[::stride]
    for tick in y_ticks:
        if y_low <= tick <= y_high:
            y = py(tick)
            label = fmt(10 ** tick) if chart.log_y else fmt(tick)
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" class="grid"/>'
                       f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="tick">{label}</text>')
    for i, series in enumerate(chart.series):
        out.extend(_series(series, series.color or color(i), px, py, y_of, top, top + ph))
    spans = []
    for marker in chart.markers:
        x, width = px(marker.step), len(marker.label) * LABEL_CHAR_PX
        spans.append((x - 4 - width, x - 4) if x > left + pw / 2 else (x + 4, x + 4 + width))
    for marker, row in zip(chart.markers, label_rows(spans)):
        x = px(marker.step)
        right_half = x > left + pw / 2
        anchor, dx = ("end", -4) if right_half else ("start", 4)
        out.append(f'<g class="marker"><title>{escape(marker.label)}</title>'
                   f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="{marker.color}" '
                   f'stroke-width="2" stroke-dasharray="6 4"/>'
                   f'<text x="{x + dx:.1f}" y="{top + 14 + row * LABEL_ROW_PX}" text-anchor="{anchor}" '
                   f'fill="{marker.color}" stroke="#fff" stroke-width="3" paint-order="stroke" class="mlabel">'
                   f'{escape(marker.label)}</text></g>')
    if not plotted:
        out.append(f'<text x="{left + pw / 2}" y="{top + ph / 2}" text-anchor="middle" class="axis">'
                   'no value can be drawn on this axis (see the note below)</text>')
    out.append("</svg>")
    return "".join(out)


def _series(series: Series, stroke: str, px: Callable[[float], float], py: Callable[[float], float],
            y_of: Callable[[float], float | None], top: float, bottom: float) -> list[str]:
    parts = [f'<g class="series"><title>{escape(series.name)}</title>']
    run: list[str] = []

    def flush() -> None:
        if series.dots:
            for point in run:
                x, y = point.split(",")
                parts.append(f'<circle cx="{x}" cy="{y}" r="3" fill="{stroke}"/>')
        elif len(run) > 1:
            parts.append(f'<polyline fill="none" stroke="{stroke}" stroke-width="1.8" points="{" ".join(run)}"/>')
        elif len(run) == 1:
            x, y = run[0].split(",")
            parts.append(f'<circle cx="{x}" cy="{y}" r="2.5" fill="{stroke}"/>')
        run.clear()

    for step, value in zip(series.steps, series.values):
        y = y_of(value)
        if y is None:
            flush()
            if not math.isfinite(value):
                x = px(step)
                what = "NaN" if math.isnan(value) else ("+inf" if value > 0 else "-inf")
                parts.append(f'<path d="M{x - 4:.1f},{top - 4} l8,8 m0,-8 l-8,8" stroke="{NON_FINITE}" '
                             f'stroke-width="2"><title>{escape(series.name)}: {what} at step {step}</title></path>')
            else:  # zero or negative on a log axis: a ring on the bottom edge
                what = "0" if value == 0 else f"{value:.4g} (negative)"
                parts.append(f'<circle cx="{px(step):.1f}" cy="{bottom:.1f}" r="3.5" fill="#fff" stroke="{stroke}" '
                             f'stroke-width="2" class="offaxis"><title>{escape(series.name)}: {what} at step {step} '
                             '(not on a log axis)</title></circle>')
            continue
        run.append(f"{px(step):.1f},{py(y):.1f}")
    flush()
    parts.append("</g>")
    return parts
