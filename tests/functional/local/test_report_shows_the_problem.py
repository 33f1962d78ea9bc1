"""The report of a job where gradients vanish to exactly zero and weights go NaN at the same step, two rules
fire there, and a third rule ends in Error: what the rules found must be on the page (and in Chromium)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.local.report.html import write_report
from sdk_ext.rules.status import reason
from tests.conftest import REPO
from tests.functional.local.png import read_png
from tests.functional.local.support import write_script

TRAIN = """
import time
import numpy as np
from sdk_ext.hooks import Hook
hook = Hook.create_from_json_file()
for step in range(60):
    with hook.step():
        broken = step >= 3
        hook.save_tensor("gradient/fc.weight", np.zeros((4, 4), np.float32) if broken else
                         np.full((4, 4), 0.1, np.float32), "gradients")
        hook.save_tensor("fc.weight", np.full((4, 4), np.nan if broken else 0.5, np.float32), "weights")
        hook.save_tensor("loss", np.float32(1.0 / (step + 1)), "losses")
        hook.save_scalar("learning_rate", 0.1 * 0.5 ** step)
    time.sleep(0.1)
hook.close()
"""

BROKEN_RULE = """
from sdk_ext.rules import Rule

class Broken(Rule):
    def invoke_at_step(self, step):
        raise RuntimeError("this custom rule is broken on purpose")
"""


def _env() -> dict[str, str]:
    """The repo_env fixture's environment (this module-scoped fixture cannot use a per-test one)."""
    paths = [str(REPO), str(REPO / "lambda"), str(REPO / "rules"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("vanish")
    script = write_script(tmp, TRAIN)
    rule_file = tmp / "broken_rule.py"
    rule_file.write_text(BROKEN_RULE)
    result = subprocess.run(
        [sys.executable, "-m", "sdk_ext.cli", "run", str(script), "--jobs-dir", str(tmp / "jobs"), "--job-name",
         "vanish", "--rule", "ExplodingTensor", "--rule", "VanishingGradient", "--rule-param",
         "VanishingGradient:threshold=0.0001", "--custom-rule", f"{rule_file}:Broken", "--collection", "gradients",
         "--collection", "weights", "--collection", "losses", "--save-interval", "1", "--rule-timeout", "30",
         "--report"], env=_env(), capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp / "jobs" / "vanish", result.stdout


def test_summary_shows_each_reason_whole(job: tuple[Path, str]) -> None:
    job_dir, out = job
    statuses = {s["RuleConfigurationName"]: s for s in
                json.loads((job_dir / "job.json").read_text())["DebugRuleEvaluationStatuses"]}
    assert statuses["VanishingGradient"]["RuleEvaluationStatus"] == "IssuesFound"
    for name in ("VanishingGradient", "ExplodingTensor"):
        full = statuses[name]["StatusDetails"]
        assert full.startswith("RuleEvaluationConditionMet: Evaluation of the rule")  # kept in the status
        why = reason(full)
        assert len(why) > 40 and not why.startswith("Evaluation of the rule")
        assert f"  {name}: IssuesFound at step 3 ({why})" in out.splitlines()
    assert "  Broken: Error (RuntimeError: this custom rule is broken on purpose)" in out.splitlines()


def test_report_shows_zeros_stacked_labels_advice_parameters_scalars_and_an_honest_banner(
        job: tuple[Path, str], tmp_path: Path) -> None:
    job_dir, _ = job
    html = (job_dir / "report.html").read_text()
    for forbidden in ("<script", "http://", "https://", "<link", " src=", "url("):
        assert forbidden not in html
    assert '<div class="outcome bad">' in html and "no rule found issues" not in html
    # the exact zeros VanishingGradient flagged are on the chart (rings on the bottom edge) and counted
    assert "gradient/fc.weight: 0 at step 3 (not on a log axis)" in html
    assert re.search(r"Not on the axis: \d+ values exactly 0", html)
    assert re.search(r"Not on the axis: \d+ NaN values", html)
    # two rules fired at step 3: their labels are on two rows of every chart
    charts = re.findall(r"<svg .*?</svg>", html, flags=re.DOTALL)
    assert len(charts) == 4  # losses, gradient norms, weight norms, saved scalars
    for chart in charts:
        ys = {label: y for y, label in re.findall(r'<text x="[^"]+" y="([^"]+)"[^>]*class="mlabel">([^<]+)</text>',
                                                   chart)}
        assert set(ys) == {"ExplodingTensor: IssuesFound @ 3", "VanishingGradient: IssuesFound @ 3"}
        assert len(set(ys.values())) == 2
    assert "scalar/learning_rate" in charts[3]
    assert "What to try: Lower the learning rate, clip gradients" in html
    assert "parameters: threshold=0.0001" in html
    assert re.search(r'<td>Broken</td><td><span class="badge bad">Error</span>', html)


def test_report_of_a_failed_job_ends_with_the_training_log_tail(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, "print('loading data', flush=True)\nraise ValueError('no such column: label')\n")
    result = subprocess.run([sys.executable, "-m", "sdk_ext.cli", "run", str(script), "--jobs-dir", str(tmp_path),
                             "--job-name", "failed", "--rule", "ExplodingTensor", "--report"], env=repo_env,
                            capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 1
    html = (tmp_path / "failed" / "report.html").read_text()
    assert "Training log (last" in html and "loading data" in html and "ValueError: no such column: label" in html
    assert '<div class="outcome bad">The job failed' in html


def test_report_with_zeros_and_stacked_labels_renders_in_headless_chromium(job: tuple[Path, str],
                                                                           tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("SDK_EXT_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium not found (SDK_EXT_REQUIRE_CHROMIUM=1): apt-get install -y chromium")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    job_dir, _ = job
    html = tmp_path / "report.html"
    write_report(job_dir, html)
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,2600",
                    f"--screenshot={shot}", html.as_uri()], capture_output=True, timeout=120, check=True)
    pixels = read_png(shot)[..., :3].astype(int)

    def near(rgb: tuple[int, int, int], rows: slice = slice(None), tolerance: int = 40) -> int:
        return int((np.abs(pixels[rows] - np.array(rgb)).sum(axis=2) < tolerance).sum())

    banner = slice(0, 200)
    assert near((0xFD, 0xEC, 0xEA), banner, 10) > 2000  # the red "issues" banner, not the green one
    assert near((0xEA, 0xF7, 0xEA), banner, 10) < 100
    assert near((0xD6, 0x27, 0x28)) > 500  # markers and NaN crosses
    assert near((0x1F, 0x77, 0xB4)) > 300  # the first series' lines and its rings at zero
