"""The SVG charts and the CLI console (progress on a terminal only)."""

from __future__ import annotations

import io
import math
import re

from sdk_ext.local import svg
from sdk_ext.local.console import Console


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


def test_log_scale_skips_non_positive_values_and_an_empty_chart_says_so() -> None:
    out = svg.render(svg.Chart(title="w", y_label="norm", series=[svg.Series("w", [0, 1, 2], [0.0, 1.0, 10.0])],
                               log_y=True))
    assert len(re.findall(r"<polyline ", out)) == 1 and ">10</text>" in out and ">1</text>" in out
    empty = svg.render(svg.Chart(title="e", y_label="v", series=[svg.Series("x", [0], [math.nan])]))
    assert "no finite values to plot" in empty


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
