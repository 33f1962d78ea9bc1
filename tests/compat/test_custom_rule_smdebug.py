"""A custom rule program written for smdebug 1.0.34 runs on sdk_ext after swapping the import prefix,
and sees the same steps and fires at the same step as under real smdebug (on a trial written by
sdk_ext.hooks.Hook)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.functional.rules.trial_writer import write_trial

PROGRAM = textwrap.dedent('''
    import json, sys
    from smdebug.exceptions import NoMoreData, RuleEvaluationConditionMet
    from smdebug.rules.rule import Rule
    from smdebug.rules.rule_invoker import invoke_rule
    from smdebug.trials import create_trial

    class GradientAbove(Rule):
        def __init__(self, base_trial, threshold="1.0"):
            super().__init__(base_trial, action_str="")
            self.threshold = float(threshold)
            self.seen = []

        def set_required_tensors(self, step):
            for name in self.base_trial.tensor_names(collection="gradients"):
                if STRICT or step in self.base_trial.tensor(name).steps():
                    self.req_tensors.add(name, steps=[step])  # strict: a missing one skips the step

        def invoke_at_step(self, step):
            self.seen.append(step)
            for t in self.req_tensors.get():
                if t.reduction_value(step, "max", abs=True) > self.threshold:
                    return True
            return False

    STRICT = sys.argv[3] == "strict"
    rule = GradientAbove(create_trial(sys.argv[1]), threshold=sys.argv[2])
    result = {"fired": None, "end": None}
    try:
        invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=True)
    except RuleEvaluationConditionMet as e:
        result["fired"] = e.step
    except NoMoreData:
        result["end"] = "NoMoreData"
    result["seen"] = rule.seen
    print(json.dumps(result))
''')


def run(python: str, program: str, args: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.run([python, "-c", program, *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.smdebug
@pytest.mark.parametrize("threshold, strict, fired, seen", [
    ("1.0", "lenient", 7, [0, 3, 7]),
    ("100", "lenient", None, [0, 3, 7, 10]),
    ("1.0", "strict", None, [3]),  # gradient/b exists only at step 3: every other step is skipped
])
def test_same_program_same_outcome(threshold, strict, fired, seen, tmp_path, smdebug_python, repo_env):
    trial = write_trial(tmp_path / "trial", [
        (0, {"gradient/a": np.full(4, 0.5)}),
        (3, {"gradient/a": np.full(4, 0.5), "gradient/b": np.full(2, -0.1)}),
        (7, {"gradient/a": np.array([0.5, -2.0, 0.1, 0.0])}),
        (10, {"gradient/a": np.full(4, 0.5)}),
    ])
    ours = PROGRAM.replace("from smdebug.", "from sdk_ext.")
    args = [str(trial), threshold, strict]
    theirs = run(str(smdebug_python), PROGRAM, args, {"PATH": "/usr/bin:/bin"})
    mine = run(sys.executable, ours, args, repo_env)
    assert theirs == mine
    assert (mine["fired"], mine["seen"]) == (fired, seen)
    assert mine["end"] == (None if fired is not None else "NoMoreData")
