"""A built-in rule with several checks says which of them matched nothing.

PoorWeightInitialization has three checks; on a model that calls ``F.relu`` (no ReLU module, so no
activation input is ever saved) its activation check evaluates nothing. The rule used to end in a
plain NoIssuesFound; now its status says ``CheckedPartly:`` and names the check and what it needs, and
``sdk-ext rules`` shows it as such, as a user running the rule over their trial sees it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import sdk_ext.pytorch as smd
from sdk_ext.rules.status import CHECKED_PARTLY, checked_nothing, checked_partly, coverage_gap


class FunctionalRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


def write_trial(out: Path) -> None:
    torch.manual_seed(0)
    model, loss_fn = FunctionalRelu(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = smd.Hook(out, save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients", "losses", "relu_input"])
    hook.get_collection("relu_input").include(".*relu_input")  # what the rule's default regex looks for
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(3)
    for _ in range(6):
        x, y = torch.randn(8, 8, generator=g), torch.randint(0, 3, (8,), generator=g)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    hook.close()


def run_rules(trial: Path, out: Path, env: dict[str, str], *rules: str) -> subprocess.CompletedProcess[str]:
    args = [a for r in rules for a in ("--rule", r)]
    return subprocess.run([sys.executable, "-m", "sdk_ext.cli", "rules", str(trial), *args, "--output-dir", str(out)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)


def test_poor_weight_initialization_names_the_check_that_saw_no_activation(tmp_path: Path,
                                                                            repo_env: dict[str, str]) -> None:
    trial = tmp_path / "trial"
    write_trial(trial)
    result = run_rules(trial, tmp_path / "rules", repo_env, "PoorWeightInitialization")
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("PoorWeightInitialization:"))
    assert "NoIssuesFound, but it checked only part" in line
    assert "the activation inputs check matched no tensor" in line and "'.*relu_input'" in line
    assert "only the gradients and losses checks ran" in line

    status = json.loads((tmp_path / "rules" / "PoorWeightInitialization" / "status.json").read_text())
    details = status["StatusDetails"]
    assert status["RuleEvaluationStatus"] == "NoIssuesFound"
    assert details.startswith(CHECKED_PARTLY) and checked_partly(details) and not checked_nothing(details)
    assert details.endswith("only the gradients and losses checks ran. Reached end_step 6")  # how it ended follows
    gap = coverage_gap(details)
    assert gap is not None and gap[0] == "checked only part"


def test_overtraining_without_validation_losses_says_the_validation_check_did_not_run(
    tmp_path: Path, repo_env: dict[str, str]
) -> None:
    trial = tmp_path / "trial"
    write_trial(trial)  # TRAIN steps only: no EVAL losses
    result = run_rules(trial, tmp_path / "rules", repo_env, "Overtraining")
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("Overtraining:"))
    assert "checked only part" in line and "the validation loss check matched no tensor" in line
    assert "only the training loss check ran" in line
