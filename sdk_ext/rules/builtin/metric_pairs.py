"""Training vs validation metrics of a GLOBAL-mode (XGBoost) trial, told apart by name.

XGBoost saves every metric in GLOBAL mode as ``<evaluation set>-<metric>`` (smdebug's names, kept by
sdk_ext.xgboost). A metric of the set named ``train`` is a training metric; the same metric of any
other set (``validation``, ``eval``, ``valid_0``...) is its validation counterpart. Rules that need
both (Overfit, Overtraining) pair them this way; a trial with GLOBAL losses and no pair cannot be
judged by them, and they say so (:func:`no_pair_reason`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

TRAIN_PREFIX = "train-"


@dataclass(frozen=True, slots=True)
class MetricPair:
    metric: str  # e.g. "rmse", "error@0.7"
    train: str  # "train-rmse"
    validation: str  # "validation-rmse"


def metric_pairs(names: Iterable[str]) -> list[MetricPair]:
    """Every ``train-<m>`` with each ``<other set>-<m>`` among ``names`` (sorted by validation name)."""
    names = set(names)
    pairs = []
    for train in sorted(n for n in names if n.startswith(TRAIN_PREFIX)):
        metric = train[len(TRAIN_PREFIX):]
        for other in sorted(names):
            if other != train and other.endswith("-" + metric) and not other.startswith(TRAIN_PREFIX):
                pairs.append(MetricPair(metric, train, other))
    return pairs


def validation_names(names: Iterable[str]) -> set[str]:
    """The names among ``names`` that are the validation side of a pair."""
    return {p.validation for p in metric_pairs(names)}


def no_pair_reason(losses: Iterable[str]) -> str:
    """Why a GLOBAL-mode trial with these losses gives a rule no training/validation pair, and the fix."""
    shown = sorted(losses)[:6]
    return (f"the losses saved in GLOBAL mode ({', '.join(shown) or 'none'}) hold no training/validation pair "
            f"'train-<metric>' + '<validation set>-<metric>'. With XGBoost, name the training set 'train' "
            f"(xgb.train(..., evals=[(dtrain, 'train'), (dvalid, 'validation')])); with other frameworks, save "
            f"losses in TRAIN and EVAL mode (hook.set_mode)")


def no_loss_reason(step: int, metrics: Iterable[str]) -> str:
    """Why a rule that judges losses finds none at ``step`` although metrics were saved there."""
    shown = sorted(metrics)[:6]
    return (f"step {step} has metrics ({', '.join(shown)}) but no loss: every metric saved grows as the model "
            "improves (auc, aucpr, map, ndcg, pre...), and this rule judges losses. Add a loss metric (XGBoost: "
            "eval_metric 'logloss', 'mlogloss', 'rmse'...)")


def has_any_loss(trial: Any) -> bool:
    """Whether the trial holds, at any step so far, a tensor of the ``losses`` collection or one named like a loss."""
    collections = trial.collections()
    names = collections.keys() if isinstance(collections, dict) else collections
    if "losses" in names and trial.tensor_names(collection="losses"):
        return True
    return bool(trial.tensor_names(regex=["(?i)loss"]))


__all__ = ["TRAIN_PREFIX", "MetricPair", "has_any_loss", "metric_pairs", "no_loss_reason", "no_pair_reason", "validation_names"]
