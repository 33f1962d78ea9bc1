"""The step tables of smdebug's trials that published custom rules read: ``_global_to_mode``,
``_mode_to_global``, ``workers_for_global_step``... as read-only views that follow the trial's refresh.

The rule program reproduces, in our own code, a custom rule published with SageMaker Debugger's examples:
it evaluates only EVAL steps, found with ``base_trial._global_to_mode[step]``, and fires when the
validation accuracy drops. The same program runs under real smdebug 1.0.34 and under sdk_ext (import
prefix swapped) on a trial written by sdk_ext's PyTorch hook, with the same outcome.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import sdk_ext.pytorch as smd
from sdk_ext.hooks import Hook
from sdk_ext.modes import ModeKeys
from sdk_ext.trials import create_trial

PROGRAM = textwrap.dedent('''
    import json, sys
    import numpy as np
    from smdebug import modes
    from smdebug.exceptions import NoMoreData, RuleEvaluationConditionMet
    from smdebug.rules.rule import Rule
    from smdebug.rules.rule_invoker import invoke_rule
    from smdebug.trials import create_trial

    class AccuracyDrop(Rule):
        def __init__(self, base_trial, predictions="CrossEntropyLoss_input_0",
                     labels="CrossEntropyLoss_input_1", threshold="0.3"):
            super().__init__(base_trial, action_str="")
            self.predictions, self.labels, self.threshold = predictions, labels, float(threshold)
            self.best, self.seen = 0.0, []

        def invoke_at_step(self, step):
            mode, mode_step = self.base_trial._global_to_mode[step]
            if mode != modes.EVAL:
                return False
            self.seen.append([step, mode_step])
            scores = self.base_trial.tensor(self.predictions).value(mode_step, mode=modes.EVAL)
            labels = self.base_trial.tensor(self.labels).value(mode_step, mode=modes.EVAL)
            accuracy = float(np.mean(np.argmax(scores, axis=1) == labels))
            fired = accuracy < self.best - self.threshold
            self.best = max(self.best, accuracy)
            return fired

    trial = create_trial(sys.argv[1])
    rule = AccuracyDrop(trial, threshold=sys.argv[2])
    result = {"fired": None, "end": None}
    try:
        invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=True)
    except RuleEvaluationConditionMet as e:
        result["fired"] = e.step
    except NoMoreData:
        result["end"] = "NoMoreData"
    result["seen"] = rule.seen
    result["eval_to_global"] = {str(k): v for k, v in trial._mode_to_global[modes.EVAL].items()}
    print(json.dumps(result))
''')


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def write_validated_trial(out: Path, *, spoil_at: int) -> None:
    """Train 8 steps; after every second one validate twice. From TRAIN step ``spoil_at`` on, the weights are
    scrambled, so later validations get worse."""
    torch.manual_seed(0)
    model, loss_fn = Classifier(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    hook = smd.Hook(out, save_config=smd.SaveConfig(save_interval=1), include_collections=["custom"])
    hook.get_collection("custom").include("^CrossEntropyLoss_input_")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(2)
    centers = torch.eye(3, 4) * 4

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 3, (16,), generator=g)
        return centers[y] + torch.randn(16, 4, generator=g) * 0.3, y

    for i in range(8):
        hook.set_mode(smd.modes.TRAIN)
        x, y = batch()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if i == spoil_at:
            with torch.no_grad():
                model.fc.weight.copy_(-model.fc.weight)
        if i % 2 == 1:
            hook.set_mode(smd.modes.EVAL)
            with torch.no_grad():
                for _ in range(2):
                    x, y = batch()
                    loss_fn(model(x), y)
    hook.close()
    assert hook.failure is None


def run(python: str, program: str, args: list[str], env: dict[str, str]) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run([python, "-c", program, *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.smdebug
@pytest.mark.parametrize("spoil_at, fires", [(4, True), (100, False)])
def test_published_rule_reading_global_to_mode_runs_the_same_as_under_smdebug(
    tmp_path: Path, smdebug_python: Path, repo_env: dict[str, str], spoil_at: int, fires: bool
) -> None:
    trial = tmp_path / "trial"
    write_validated_trial(trial, spoil_at=spoil_at)
    theirs = run(str(smdebug_python), PROGRAM, [str(trial), "0.3"], {"PATH": "/usr/bin:/bin"})
    mine = run(sys.executable, PROGRAM.replace("from smdebug", "from sdk_ext"), [str(trial), "0.3"], repo_env)
    assert mine == theirs
    # EVAL steps follow TRAIN steps 1, 3, 5 and 7: global steps 2-3, 6-7, 10-11, 14-15
    assert mine["eval_to_global"] == {"0": 2, "1": 3, "2": 6, "3": 7, "4": 10, "5": 11, "6": 14, "7": 15}
    if fires:
        assert mine["fired"] == 10 and mine["end"] is None
    else:
        assert mine["fired"] is None and mine["end"] == "NoMoreData" and len(mine["seen"]) == 8


def test_step_tables_are_read_only_views_that_follow_a_refresh(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    hook = Hook(str(out), save_config=1)
    for mode in (ModeKeys.TRAIN, ModeKeys.TRAIN, ModeKeys.EVAL):
        hook.set_mode(mode)
        with hook.step():
            hook.save_tensor("x", np.ones(2))
    hook.flush()
    trial = create_trial(str(out), timeout=5)
    global_to_mode, mode_to_global = trial._global_to_mode, trial._mode_to_global
    assert dict(global_to_mode) == {0: (ModeKeys.TRAIN, 0), 1: (ModeKeys.TRAIN, 1), 2: (ModeKeys.EVAL, 0)}
    assert dict(mode_to_global[ModeKeys.EVAL]) == {0: 2} and ModeKeys.GLOBAL not in mode_to_global
    with pytest.raises(TypeError):
        global_to_mode[9] = (ModeKeys.TRAIN, 9)  # type: ignore[index]
    with pytest.raises(TypeError):
        mode_to_global[ModeKeys.EVAL][5] = 9  # type: ignore[index]

    hook.set_mode(ModeKeys.EVAL)
    with hook.step():
        hook.save_tensor("y", np.ones(2))
    hook.close()
    assert trial.steps() == [0, 1, 2, 3]  # a query refreshes; the views it handed out before see the new step
    assert global_to_mode[3] == (ModeKeys.EVAL, 1) and mode_to_global[ModeKeys.EVAL][1] == 3
    assert trial.global_step_to_tensors_map[3] == {"y"} and trial.mode_to_tensors_map[ModeKeys.EVAL] == {"x", "y"}
    assert trial.mode(3) == global_to_mode[3][0]


def test_workers_for_global_step_names_who_wrote_each_step(tmp_path: Path) -> None:
    out = tmp_path / "trial"
    hooks = [Hook(str(out), rank=rank, world_size=2, include_workers="all", save_config=1) for rank in (0, 1)]
    for rank, hook in enumerate(hooks):
        for _ in range(3 if rank == 0 else 2):
            with hook.step():
                hook.save_tensor("x", np.full(2, rank))
    for hook in hooks:
        hook.close()
    trial = create_trial(str(out))
    assert dict(trial.workers_for_global_step) == {0: {"worker_0", "worker_1"}, 1: {"worker_0", "worker_1"},
                                                   2: {"worker_0"}}
    assert trial.worker_set == {"worker_0", "worker_1"}
