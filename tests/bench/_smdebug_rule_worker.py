"""Runs under the smdebug 1.0.34 venv: the same VanishingGradient decision as a custom smdebug rule,
evaluated live with smdebug's own invoke_rule; writes {"step", "time"} to OUT when it fires.

    $SMDEBUG_PYTHON _smdebug_rule_worker.py TRIAL_DIR OUT_JSON
"""

import json
import sys
import time

from smdebug.exceptions import RuleEvaluationConditionMet
from smdebug.rules.rule import Rule
from smdebug.rules.rule_invoker import invoke_rule
from smdebug.trials import create_trial


class VanishingGradientLike(Rule):
    def __init__(self, base_trial, threshold=1e-7):
        super().__init__(base_trial, action_str="")
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection="gradients"):
            if self.base_trial.tensor(name).reduction_value(step, "mean", abs=True) < self.threshold:
                return True
        return False


def main():
    trial_dir, out = sys.argv[1], sys.argv[2]
    trial = create_trial(trial_dir)
    try:
        invoke_rule(VanishingGradientLike(trial), raise_eval_cond=True)
    except RuleEvaluationConditionMet as fired:
        with open(out, "w") as f:
            json.dump({"step": fired.step, "time": time.time()}, f)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
