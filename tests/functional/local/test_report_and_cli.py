"""The HTML report and the sdk-ext CLI, on a real local job that goes wrong at step 20 and is stopped."""

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

from sdk_ext.local import run_training_job
from sdk_ext.local.report.html import write_report
from tests.functional.local.png import read_png
from tests.functional.local.support import HOOKED, fake_rules_dir, request, rule, settings, write_script


@pytest.fixture(scope="module")
def stopped_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    script = write_script(tmp, HOOKED)
    req = request("went-wrong", rules=[rule("Exploding", fake="fire_on_file", file="bad_step"), rule("Quiet")])
    final = run_training_job(req, settings=settings(tmp), entry_point=script)
    assert final["TrainingJobStatus"] == "Stopped"
    return tmp / "jobs" / "went-wrong"


def _cli(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sdk_ext.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def _svgs(html: str) -> list[str]:
    return re.findall(r"<svg .*?</svg>", html, flags=re.DOTALL)


def test_report_is_self_contained_and_shows_what_happened(stopped_job: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    data = write_report(stopped_job, out)
    html = out.read_text()
    for forbidden in ("<script", "http://", "https://", "<link", " src=", "url("):
        assert forbidden not in html
    assert "Rule Exploding stopped the job at step 20." in html
    charts = _svgs(html)
    assert len(charts) == 3  # losses, gradient norms, weight norms
    losses, grads, weights = charts
    # every saved step of the loss is on its line; the marker sits at step 20 on every chart
    points = re.search(r'<polyline [^>]*points="([^"]+)"', losses)
    assert points is not None and len(points.group(1).split()) == len(data.steps) >= 21
    for chart in charts:
        assert "Exploding: IssuesFound @ 20" in chart
    # norms go NaN from step 20: lines stop there, red crosses mark each NaN step
    assert "gradient/Net_fc1.weight: NaN at step 20" in grads and "Net_fc1.weight: NaN at step 20" in weights
    assert "(log scale)" in grads
    assert [s.name for s in data.gradients.series] == ["gradient/Net_fc1.weight", "gradient/Net_fc2.weight"]
    first = data.gradients.series[0]
    assert first.values[:20] == pytest.approx([np.linalg.norm(np.full((8, 4), 0.05))] * 20)
    assert all(np.isnan(v) for v in first.values[20:])
    assert re.search(r'badge bad">IssuesFound</span></td><td>20</td>', html)
    assert 'badge warn">Stopped</span> Stopped' in html


def test_report_of_a_plain_trial_has_no_job_facts(stopped_job: Path, tmp_path: Path) -> None:
    out = tmp_path / "trial.html"
    data = write_report(stopped_job / "output" / "tensors", out)
    html = out.read_text()
    assert data.job is None and data.verdicts == []
    assert "No Debugger rules ran" in html and "no job information" in html.lower()
    assert len(_svgs(html)) == 3 and "IssuesFound @" not in html


def test_report_renders_in_headless_chromium(stopped_job: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("SDK_EXT_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium not found (SDK_EXT_REQUIRE_CHROMIUM=1): apt-get install -y chromium")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    html = tmp_path / "report.html"
    write_report(stopped_job, html)
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,1200",
                    f"--screenshot={shot}", html.as_uri()], capture_output=True, timeout=120, check=True)
    pixels = read_png(shot)[..., :3].astype(int)
    assert pixels.shape[:2] == (1200, 1000)

    def near(rgb: tuple[int, int, int]) -> int:
        return int((np.abs(pixels - np.array(rgb)).sum(axis=2) < 60).sum())

    # the charts were drawn: the first series' blue lines, the red verdict markers and NaN crosses
    assert near((0x1F, 0x77, 0xB4)) > 500
    assert near((0xD6, 0x27, 0x28)) > 500
    plot = pixels[300:1200]
    assert plot.reshape(-1, 3).std(axis=0).mean() > 10  # not a blank page


def test_cli_trial_summary_and_tensor_values(stopped_job: Path, repo_env: dict[str, str]) -> None:
    summary = _cli("trial", str(stopped_job), env=repo_env)
    assert summary.returncode == 0, summary.stderr
    assert "\r" not in summary.stdout + summary.stderr and "\x1b" not in summary.stdout + summary.stderr
    assert "  workers: worker_0" in summary.stdout
    assert re.search(r"  steps: (2[1-9]|[3-9]\d) \(0 to \d+\)", summary.stdout)
    assert "gradients (2)" in summary.stdout and "    Net_fc1.weight  (" in summary.stdout
    as_json = json.loads(_cli("trial", str(stopped_job), "--json", env=repo_env).stdout)
    assert sorted(as_json["tensors"]) == ["CrossEntropyLoss_output_0", "Net_fc1.weight", "gradient/Net_fc1.weight",
                                          "gradient/Net_fc2.weight"]
    values = _cli("trial", str(stopped_job), "--tensor", "Net_fc1.weight", "--step", "19", "--step", "20",
                  env=repo_env)
    assert values.stdout.splitlines() == [
        "step 19: shape [8, 4], dtype float32, nan 0, inf 0, min 0.5, max 0.5, mean 0.5, l2 2.82843",
        "step 20: shape [8, 4], dtype float32, nan 32, inf 0"]
    loss = json.loads(_cli("trial", str(stopped_job), "--tensor", "CrossEntropyLoss_output_0", "--step", "1",
                           "--json", env=repo_env).stdout)
    assert loss == [{"step": 1, "value": 1.0}]
    missing = _cli("trial", str(stopped_job), "--tensor", "nope", env=repo_env)
    assert missing.returncode == 2 and "no tensor 'nope'" in missing.stderr


def test_cli_rules_over_a_saved_trial(stopped_job: Path, tmp_path: Path, repo_env: dict[str, str]) -> None:
    env = {**repo_env, "SDK_EXT_RULES_DIR": str(fake_rules_dir(tmp_path))}
    out = tmp_path / "rule-out"
    result = _cli("rules", str(stopped_job), "--rule", "ExplodingTensor", "--rule-param",
                  "ExplodingTensor:fake=fire_on_file", "--rule-param", "ExplodingTensor:file=bad_step",
                  "--output-dir", str(out), env=env)
    assert result.returncode == 3, result.stderr
    assert result.stdout.startswith("ExplodingTensor: IssuesFound at step 20")
    argv = json.loads((out / "ExplodingTensor" / "argv.json").read_text())["argv"]
    assert argv[argv.index("--end-step") + 1] == str(int(json.loads(_cli(
        "trial", str(stopped_job), "--json", env=repo_env).stdout)["last_step"]) + 1)
    assert "rule_to_invoke=ExplodingTensor" in argv
    unknown = _cli("rules", str(stopped_job), "--rule", "NoSuchRule", env=env)
    assert unknown.returncode == 2 and "not a built-in rule" in unknown.stderr and "ExplodingTensor" in unknown.stderr


def test_cli_run_prints_which_rule_stopped_the_job_and_writes_the_report(tmp_path: Path,
                                                                         repo_env: dict[str, str]) -> None:
    env = {**repo_env, "SDK_EXT_RULES_DIR": str(fake_rules_dir(tmp_path))}
    script = write_script(tmp_path, HOOKED)
    result = _cli("run", "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "cli-job", "--rule", "ExplodingTensor",
                  "--rule-param", "ExplodingTensor:fake=fire_on_file", "--rule-param", "ExplodingTensor:file=bad_step",
                  "--collection", "weights", "--report", str(script), env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Job cli-job: Stopped (Stopped)"
    assert "  rule ExplodingTensor stopped the job at step 20" in lines
    report = tmp_path / "jobs" / "cli-job" / "report.html"
    assert f"  report: {report.resolve()}" in lines
    assert report.is_file()
    assert "\r" not in result.stdout + result.stderr  # not a terminal: no progress, no echoed training output
    sent = json.loads((tmp_path / "jobs" / "cli-job" / "request.json").read_text())
    assert sent["DebugRuleConfigurations"][0]["RuleParameters"]["rule_to_invoke"] == "ExplodingTensor"
    assert {"CollectionName": "weights", "CollectionParameters": {"save_interval": "10"}} in \
        sent["DebugHookConfig"]["CollectionConfigurations"]
    # the saved request runs again as it is
    again = _cli("run", "--request", str(tmp_path / "jobs" / "cli-job" / "request.json"), "--job-name", "again",
                 "--jobs-dir", str(tmp_path / "jobs"), "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["TrainingJobStatus"] == "Stopped"


def test_cli_run_failed_job_exits_1_and_bad_usage_exits_2(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, "raise SystemExit('broken input file')\n")
    failed = _cli("run", "--jobs-dir", str(tmp_path / "jobs"), str(script), env=repo_env)
    assert failed.returncode == 1
    assert 'ErrorMessage "broken input file"' in failed.stdout
    usage = _cli("run", "--rule-param", "nocolon", str(script), env=repo_env)
    assert usage.returncode == 2 and "expected NAME:KEY=VALUE" in usage.stderr
    nothing = _cli("run", env=repo_env)
    assert nothing.returncode == 2 and "give a training script" in nothing.stderr


def test_cli_passes_script_arguments_after_double_dash(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = write_script(tmp_path, "import os, sys\nprint('ARGS', sys.argv[1:])\n"
                          "print('CONFIG', os.path.isfile(os.environ['SMDEBUG_CONFIG_FILE_PATH']))\n")
    result = _cli("run", "--jobs-dir", "jobs", "--job-name", "args", "-H", "lr=0.5", str(script),
                  "--", "--epochs", "3", env=repo_env, cwd=tmp_path)  # a relative jobs dir; the script runs elsewhere
    assert result.returncode == 0, result.stderr
    log = (tmp_path / "jobs" / "args" / "logs" / "training.log").read_text()
    assert "ARGS ['--lr', '0.5', '--epochs', '3']" in log
    assert "CONFIG True" in log
