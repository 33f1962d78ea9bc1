"""``smdebug.core.access_layer.utils``: the end-of-training marker of a trial (local or ``s3://``).

The marker is ``training_job_end.ts`` at the trial root (see :mod:`sdk_ext.format.paths`); readers
(``create_trial``, the rule evaluator) stop waiting for new steps once it exists.
"""

from __future__ import annotations

import os

from sdk_ext.format.paths import END_OF_JOB
from sdk_ext.storage import open_storage


def has_training_ended(trial_prefix: str | os.PathLike[str]) -> bool:
    """Whether the trial at ``trial_prefix`` has its end-of-training marker.

    Raises StorageError when it cannot be checked (a missing bucket, denied access): a failed check is
    never taken for "not ended yet".
    """
    return open_storage(trial_prefix).exists(END_OF_JOB)


def training_has_ended(trial_prefix: str | os.PathLike[str]) -> None:
    """Write the end-of-training marker of the trial at ``trial_prefix`` (what a hook's ``close()`` does).

    As in smdebug, nothing is written inside a SageMaker training job (``TRAINING_JOB_NAME`` set),
    where the platform marks the end itself.
    """
    if "TRAINING_JOB_NAME" in os.environ:
        return
    open_storage(trial_prefix).write(END_OF_JOB, b"")


__all__ = ["has_training_ended", "training_has_ended"]
