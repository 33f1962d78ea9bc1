"""One timed live rule evaluation over a local trial, in a fresh process; prints one JSON line. Run by rule_read.py.

    python _rule_read_worker.py IMPL TRIAL_DIR

IMPL: ``sdk_ext`` (sdk_ext's built-in VanishingGradient through ``sdk_ext.rules.invoke_rule``) or ``smdebug``
(smdebug 1.0.34's ``invoke_rule`` with the same decision as a custom rule, as in _smdebug_rule_worker.py:
SageMaker's built-in rule code was never published; run with the smdebug venv's interpreter). Both read
``reduction_value(step, "mean", abs=True)`` of every tensor of the ``gradients`` collection at every step,
through their trial, until the end of training (NoMoreData). Imports happen before the clock starts.
This file imports neither sdk_ext nor smdebug at module level so either venv can run it.
"""

from __future__ import annotations

import json
import sys
import time


def run_sdk_ext(trial_dir: str) -> dict[str, float]:
    from sdk_ext.rules import invoke_rule
    from sdk_ext.rules.builtin.vanishing_gradient import VanishingGradient
    from sdk_ext.trials import create_trial

    class Counted(VanishingGradient):
        steps = 0

        def invoke_at_step(self, step: int) -> bool:
            Counted.steps += 1
            return super().invoke_at_step(step)

    return timed(create_trial, Counted, invoke_rule, trial_dir)


def run_smdebug(trial_dir: str) -> dict[str, float]:
    import logging

    from smdebug.rules.rule import Rule
    from smdebug.rules.rule_invoker import invoke_rule
    from smdebug.trials import create_trial

    logging.getLogger("smdebug").setLevel(logging.WARNING)

    class Counted(Rule):
        steps = 0

        def __init__(self, base_trial, threshold=1e-7):
            super().__init__(base_trial, action_str="")
            self.threshold = float(threshold)

        def invoke_at_step(self, step):
            Counted.steps += 1
            for name in self.base_trial.tensor_names(collection="gradients"):
                if self.base_trial.tensor(name).reduction_value(step, "mean", abs=True) < self.threshold:
                    return True
            return False

    return timed(create_trial, Counted, invoke_rule, trial_dir)


def timed(create_trial, rule_class, invoke_rule, trial_dir: str) -> dict[str, float]:
    started = time.perf_counter()
    trial = create_trial(trial_dir)
    opened = time.perf_counter()
    rule = rule_class(trial)
    gradients = len(trial.tensor_names(collection="gradients"))
    try:
        invoke_rule(rule, raise_eval_cond=True)
    except Exception as e:  # the end of training: NoMoreData (each library has its own class)
        if type(e).__name__ != "NoMoreData":
            raise
    done = time.perf_counter()
    return {"total_s": done - started, "open_s": opened - started, "rule_s": done - opened,
            "steps": rule_class.steps, "gradients": gradients}


def main(argv: list[str]) -> None:
    impl, trial_dir = argv[1], argv[2]
    result = run_sdk_ext(trial_dir) if impl == "sdk_ext" else run_smdebug(trial_dir)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv)
