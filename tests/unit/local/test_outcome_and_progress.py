"""The report's banner never says "no rule found issues" when a rule could not look; the live status line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.local.cli.progress import Seen, TrialWatch, elapsed_text, status_line
from sdk_ext.local.report.data import ReportData, Verdict
from sdk_ext.local.report.html import outcome, render_html
from sdk_ext.modes import ModeKeys
from sdk_ext.rules.status import no_issues_details


def _data(status: str, *verdicts: Verdict, no_data: str | None = None) -> ReportData:
    return ReportData(title="t", trial_path="/t", steps=[0, 1], modes={}, workers=["worker_0"], tensor_count=1,
                      collections={}, job={"TrainingJobName": "t", "TrainingJobStatus": status}, verdicts=list(verdicts),
                      no_data=no_data)


CLEAN = Verdict("ExplodingTensor", "NoIssuesFound", None, "Training ended; last saved step: 1")


def test_banner_is_green_only_when_every_rule_looked_and_found_nothing() -> None:
    assert outcome(_data("Completed", CLEAN)) == ("good", "the job completed and no rule found issues")
    errored = Verdict("VanishingGradient", "Error", None, "InternalError: boom")
    css, text = outcome(_data("Completed", CLEAN, errored))
    assert css == "warn" and "rules ended in Error: VanishingGradient" in text and "no rule found" not in text
    blind = Verdict("DeadRelu", "NoIssuesFound", None, no_issues_details("Training ended", "the rule matched no tensor"))
    css, text = outcome(_data("Completed", CLEAN, blind))
    assert css == "warn" and "rules checked nothing: DeadRelu" in text
    html = render_html(_data("Completed", CLEAN, blind))
    assert '<span class="badge warn">checked nothing</span>' in html and "<script" not in html
    css, text = outcome(_data("Completed", Verdict("ExplodingTensor", "Error", None, "ClientError: No debugging data"),
                              no_data="the script created no hook"))
    assert css == "bad" and "saved no debugging data" in text
    assert "No debugging data was saved.</b> the script created no hook" in render_html(
        _data("Completed", no_data="the script created no hook"))


def test_status_line_shows_step_mode_step_loss_and_elapsed_time() -> None:
    describe = {"TrainingJobName": "j", "SecondaryStatus": "Training",
                "DebugRuleEvaluationStatuses": [{"RuleConfigurationName": "ExplodingTensor",
                                                 "RuleEvaluationStatus": "InProgress"}]}
    line = status_line(describe, Seen(58, "TRAIN", 42, 0.41234), 67.9)
    assert line == "j: Training | step 58 (TRAIN 42) | loss 0.4123 | 0:01:07 | ExplodingTensor=InProgress"
    assert status_line(describe, Seen(), 3) == "j: Training | 0:00:03 | ExplodingTensor=InProgress"
    assert elapsed_text(3725) == "1:02:05"


def test_trial_watch_reads_the_last_step_and_loss_of_a_trial_being_written(tmp_path: Path) -> None:
    watch = TrialWatch(tmp_path / "trial")
    assert watch.seen() == Seen()  # nothing yet: no wait, no error
    hook = Hook(tmp_path / "trial", save_config=SaveConfig(save_interval=1), include_collections=["losses"])
    for step in range(3):
        hook.set_mode(ModeKeys.TRAIN if step < 2 else ModeKeys.EVAL)
        with hook.step():
            hook.save_tensor("loss", np.float32(1.0 / (step + 1)), "losses")
    hook.close()
    seen = watch.seen()
    assert (seen.step, seen.mode, seen.mode_step) == (2, "EVAL", 0)
    assert seen.loss == pytest.approx(1 / 3)
