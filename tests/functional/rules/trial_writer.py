"""Write trials for rule tests with the project's writer (sdk_ext.hooks.Hook), every step saved.

    write_trial(path, [(0, {"gradient/w": g0}), (500, {"gradient/w": g1})])
    write_trial(path, [(0, {"loss": 1.0}, "TRAIN"), (1, {"loss": 1.2}, "EVAL")], end=False)

A step is ``(global_step, {name: value})`` with an optional mode. Each tensor goes to the collection
its name suggests (``gradient...`` -> gradients, ``...weight`` -> weights, ``...loss...`` -> losses,
``labels``/``predictions`` -> those, else default) unless ``collections`` maps it elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sdk_ext.hooks import Hook, ReductionConfig, SaveConfig
from sdk_ext.modes import ModeKeys

Step = tuple[int, Mapping[str, Any]] | tuple[int, Mapping[str, Any], str | ModeKeys]


def collection_for(name: str) -> str:
    lowered = name.lower()
    if lowered.startswith("gradient"):
        return "gradients"
    if "weight" in lowered and "feature_importance" not in lowered:
        return "weights"
    if "loss" in lowered:
        return "losses"
    for special in ("labels", "predictions"):
        if lowered.endswith(special):
            return special
    return "default"


class TrialWriter:
    """A Hook that saves every step it is given; ``close(end=False)`` leaves the trial "still training"."""

    def __init__(self, path: str | Path, *, collections: Mapping[str, str] | None = None,
                 reduction_config: ReductionConfig | None = None) -> None:
        self.hook = Hook(str(path), save_config=SaveConfig(save_interval=1), reduction_config=reduction_config)
        self.collections = dict(collections or {})

    def step(self, step: int, values: Mapping[str, Any], mode: str | ModeKeys | None = None) -> None:
        if mode is not None:
            self.hook.set_mode(mode)
        with self.hook.step(step):
            for name, value in values.items():
                self.hook.save_tensor(name, value, collections_to_write=self.collections.get(name, collection_for(name)))
        self.hook.flush()

    def close(self, *, end: bool = True) -> None:
        if end:
            assert "TRAINING_JOB_NAME" not in os.environ, "the hook writes no end marker inside SageMaker"
            self.hook.close()
        else:
            self.hook.flush()


def write_trial(path: str | Path, steps: Iterable[Step], *, end: bool = True,
                collections: Mapping[str, str] | None = None,
                reduction_config: ReductionConfig | None = None) -> Path:
    writer = TrialWriter(path, collections=collections, reduction_config=reduction_config)
    for item in steps:
        writer.step(item[0], item[1], item[2] if len(item) > 2 else None)  # type: ignore[misc]
    writer.close(end=end)
    return Path(path)
