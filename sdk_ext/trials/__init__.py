"""Reading a trial back: ``create_trial(path)`` -> Trial -> Tensor (smdebug's reader API).

    from sdk_ext.trials import create_trial
    trial = create_trial("s3://bucket/job/debug-output")   # or a local directory
    for step in trial.tensor("CrossEntropyLoss_output_0").steps():
        ...

See :mod:`sdk_ext.trials.trial` for what differs from smdebug on purpose.
"""

from sdk_ext.modes import ModeKeys, StepState
from sdk_ext.trials.collections import Collection
from sdk_ext.trials.create import create_trial, no_refresh
from sdk_ext.trials.options import Clock, TrialOptions
from sdk_ext.trials.tensor import Tensor
from sdk_ext.trials.trial import LocalTrial, S3Trial, Trial

__all__ = [
    "Clock",
    "Collection",
    "LocalTrial",
    "ModeKeys",
    "S3Trial",
    "StepState",
    "Tensor",
    "Trial",
    "TrialOptions",
    "create_trial",
    "no_refresh",
]
