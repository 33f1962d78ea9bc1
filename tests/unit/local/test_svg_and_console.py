"""The SVG charts and the CLI console (progress on a terminal only)."""

from __future__ import annotations

import io
import math
import re

from sdk_ext.local.cli.console import Console
from sdk_ext.local.report import svg


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert svg.nice_ticks(0, 47, 8) == [0, 10, 20, 30, 40]
    assert svg.nice_ticks(0.013, 0.52) == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert svg.nice_ticks(5, 5)[0] <= 5
    assert svg.nice_ticks(float("nan"), 1) == []


def test_non_finite_values_break_the_line_and_are_marked() -> None:
    series = svg.Series("gradient/fc1.weight", [0, 1, 2, 3, 4], [1.0, 2.0, math.inf, 4.0, math.nan])
    out = svg.render(svg.Chart(title="g", y_label="norm", series=[series], log_y=True,
                               markers=[svg.Marker(3, "ExplodingTensor: IssuesFound @ 3")]))
    assert out.startswith("<svg ") and out.endswith("</svg>")
    assert len(re.findall(r"<polyline ", out)) == 1  # 0-1; 3 alone is a dot
    assert out.count("<circle ") == 1
    assert "gradient/fc1.weight: +inf at step 2" in out and "gradient/fc1.weight: NaN at step 4" in out
    assert "ExplodingTensor: IssuesFound @ 3" in out and 'stroke-dasharray="6 4"' in out
    assert "http" not in out


def test_log_scale_draws_zeros_on_the_bottom_edge_and_an_empty_chart_says_so() -> None:
    series = [svg.Series("w", [0, 1, 2], [0.0, 1.0, 10.0])]
    out = svg.render(svg.Chart(title="w", y_label="norm", series=series, log_y=True))
    assert len(re.findall(r"<polyline ", out)) == 1 and ">10</text>" in out and ">1</text>" in out
    # the exact zero (what VanishingGradient flags) is not dropped: a ring on the bottom edge, with its title
    assert "w: 0 at step 0 (not on a log axis)" in out and 'class="offaxis"' in out
    assert svg.off_chart(series, log_y=True) == svg.OffChart(zero=1)
    assert not svg.off_chart(series, log_y=False)
    empty = svg.render(svg.Chart(title="e", y_label="v", series=[svg.Series("x", [0], [math.nan])]))
    assert "no value can be drawn on this axis" in empty


def test_marker_labels_at_one_step_are_stacked_not_drawn_over_each_other() -> None:
    markers = [svg.Marker(5, "ExplodingTensor: IssuesFound @ 5"), svg.Marker(5, "VanishingGradient: IssuesFound @ 5"),
               svg.Marker(90, "LossNotDecreasing: IssuesFound @ 90")]
    out = svg.render(svg.Chart(title="l", y_label="v", series=[svg.Series("x", list(range(100)), [1.0] * 100)],
                               markers=markers))
    ys = [float(y) for y in re.findall(r'<text x="[^"]+" y="([^"]+)" text-anchor="\w+" fill="#d62728"', out)]
    assert len(ys) == 3 and ys[0] != ys[1]  # same step: two rows
    assert ys[2] == ys[0]  # far away: the first row again
    assert svg.label_rows([(0, 100), (50, 150), (200, 300), (60, 90)]) == [0, 1, 0, 2]


def test_console_shows_progress_on_a_terminal_only() -> None:
    out, err = io.StringIO(), io.StringIO()
    quiet = Console(out, err, interactive=False)
    quiet.progress(1, 4, "tensor")
    quiet.status("running")
    quiet.echo("training line")
    quiet.result("done")
    assert err.getvalue() == "" and out.getvalue() == "done\n"

    out, err = io.StringIO(), io.StringIO()
    tty = Console(out, err, interactive=True)
    tty.progress(2, 4, "tensor")
    assert err.getvalue().startswith("\r\x1b[2K[##########..........] 2/4 tensor")
    tty.result("done")
    assert err.getvalue().endswith("\r\x1b[2K") and out.getvalue() == "done\n"  # status line cleared first
    assert not Console(out, err, interactive=True, quiet=True).interactive
