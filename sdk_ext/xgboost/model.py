"""What the XGBoost hook saves, computed from a Booster and its evaluation log (pure, no I/O).

Every function here takes plain values (a Booster's dumps and scores, numpy arrays, the evaluation
log dict) and returns arrays keyed by the tensor name they are saved under; the hook only decides
when and writes. The names are smdebug's (README.md#xgboost), without its defects:

* metrics: ``<evaluation set>-<metric>`` for any set name (``valid_0``, ``eval``, ``my set``) and any
  metric name (``error@0.7``, ``map@5``, ``ndcg@3-``); a metric that grows as the model improves
  (:func:`is_increasing_metric`) is a metric but never a loss.
* trees: every tree the round added (``num_class x num_parallel_tree`` of them), with global tree ids.
* feature importance: every feature of the model, 0 for the unused ones.
* SHAP: ``full_shap/<feature>`` is that feature's column; ``average_shap/<feature>`` keeps smdebug's
  meaning (the signed mean, over rows and classes); ``mean_abs_shap/<feature>`` is the mean absolute
  value that importance charts use. The bias column (expected value) is not a feature and is not saved.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

#: Booster.get_score importance types, in smdebug's order.
IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")
#: trees/<column>, in trees_to_dataframe()'s order (smdebug's names) plus Depth (new: the node's depth).
TREE_COLUMNS = ("Tree", "Node", "ID", "Feature", "Split", "Yes", "No", "Missing", "Gain", "Cover", "Category")
DEPTH_COLUMN = "Depth"

# Metrics that increase as the model improves (XGBoost's built-ins, and common sklearn scorer names).
_INCREASING = frozenset({
    "auc", "aucpr", "map", "ndcg", "pre", "interval-regression-accuracy", "accuracy", "acc", "accuracy_score",
    "roc_auc_score", "average_precision_score", "f1", "f1_score", "precision", "precision_score", "recall",
    "recall_score", "r2", "r2_score", "balanced_accuracy_score",
})
_AT_SUFFIX = re.compile(r"@[^@]*$")


def is_increasing_metric(metric: str) -> bool:
    """True for a metric that grows as the model improves (``auc``, ``aucpr``, ``map@5``, ``ndcg@3-``,
    ``pre@10``...): such a metric is never put in ``losses``."""
    base = _AT_SUFFIX.sub("", metric.strip()).rstrip("-").lower()
    return base in _INCREASING


def metric_values(evals_log: Mapping[str, Mapping[str, Sequence[Any]]]) -> list[tuple[str, str, float]]:
    """``(tensor name, metric name, latest value)`` for every metric of every evaluation set.

    Values of ``xgb.cv`` (``(mean, std)`` pairs) give two tensors, ``<name>-mean`` and ``<name>-std``.
    """
    found: list[tuple[str, str, float]] = []
    for data_name, metrics in evals_log.items():
        for metric, history in metrics.items():
            if not history:
                continue
            latest = history[-1]
            name = f"{data_name}-{metric}"
            if isinstance(latest, (tuple, list)) and len(latest) == 2:
                found.append((f"{name}-mean", metric, float(latest[0])))
                found.append((f"{name}-std", metric, float(latest[1])))
            else:
                found.append((name, metric, float(latest)))
    return found


def feature_names(names: Sequence[str] | None, num_features: int) -> list[str]:
    """The model's feature names, or XGBoost's automatic ``f0``, ``f1``, ... when it has none."""
    if names:
        return [str(n) for n in names]
    return [f"f{i}" for i in range(num_features)]


def normalized_importance(scores: Mapping[str, float | Sequence[float]], features: Sequence[str]) -> dict[str, float]:
    """Every feature's share of the total score (0 for unused ones; all 0 when nothing was split on).

    A multi-target model's per-target scores (lists) count by their sum.
    """
    flat = {f: float(np.sum(v)) for f, v in scores.items()}
    total = sum(flat.values())
    out = {f: flat.get(f, 0.0) / total if total > 0 else 0.0 for f in features}
    for f, value in flat.items():  # a name the model does not list (should not happen) is kept, not lost
        out.setdefault(f, value / total if total > 0 else 0.0)
    return out


def shap_columns(contribs: np.ndarray, features: Sequence[str]) -> dict[str, np.ndarray]:
    """``feature -> its contributions``: ``(rows,)`` or ``(rows, classes)``; the bias column is dropped.

    ``contribs`` is ``Booster.predict(..., pred_contribs=True)``: ``(rows, F + 1)`` or
    ``(rows, classes, F + 1)``, the last entry of the last axis being the bias.
    """
    return {f: np.ascontiguousarray(contribs[..., i]) for i, f in enumerate(features[: contribs.shape[-1] - 1])}


def average_shap(column: np.ndarray) -> np.ndarray:
    """smdebug's ``average_shap``: the signed mean over rows (and classes), shape (1,), the column's dtype."""
    return np.asarray([column.mean()], dtype=column.dtype)


def mean_abs_shap(column: np.ndarray) -> np.ndarray:
    """The mean absolute contribution over rows (and classes), shape (1,): what importance charts use."""
    return np.asarray([np.abs(column).mean()], dtype=column.dtype)


def _node_rows(node: Mapping[str, Any], tree: int, depth: int, rows: list[tuple[Any, ...]]) -> None:
    node_id = int(node["nodeid"])
    if "leaf" in node:
        rows.append((tree, node_id, f"{tree}-{node_id}", "Leaf", math.nan, "nan", "nan", "nan",
                     float(node["leaf"]), float(node.get("cover", math.nan)), "nan", depth))
        return
    condition = node.get("split_condition", math.nan)
    categorical = isinstance(condition, list)  # a categorical split lists the categories going "yes"
    split = math.nan if categorical else float(condition)
    category = ",".join(str(c) for c in condition) if categorical else "nan"
    rows.append((tree, node_id, f"{tree}-{node_id}", str(node["split"]), split, f"{tree}-{node['yes']}",
                 f"{tree}-{node['no']}", f"{tree}-{node['missing']}", float(node.get("gain", math.nan)),
                 float(node.get("cover", math.nan)), category, depth))
    for child in node.get("children", ()):
        _node_rows(child, tree, depth + 1, rows)


def tree_table(json_dumps: Iterable[str], first_tree: int) -> dict[str, np.ndarray]:
    """``column -> array`` for trees given as ``Booster.get_dump(dump_format="json", with_stats=True)``.

    The columns and dtypes are those smdebug saved from ``trees_to_dataframe()`` (Tree, Node int64;
    Split, Gain, Cover float64 with NaN Split on leaves; strings elsewhere, ``'nan'`` on leaves), rows
    sorted by (Tree, Node); ``first_tree`` is the global id of the first dump. Gain of a leaf is its
    value, as in trees_to_dataframe. A categorical split has Split NaN and its categories in Category
    as text (``"1,3"``). Plus ``Depth`` (int64): each node's depth, the root's being 0.
    """
    rows: list[tuple[Any, ...]] = []
    for i, dump in enumerate(json_dumps):
        tree_rows: list[tuple[Any, ...]] = []
        _node_rows(json.loads(dump), first_tree + i, 0, tree_rows)
        rows += sorted(tree_rows, key=lambda r: r[1])
    columns = list(zip(*rows)) if rows else [()] * (len(TREE_COLUMNS) + 1)
    out: dict[str, np.ndarray] = {}
    for name, values in zip((*TREE_COLUMNS, DEPTH_COLUMN), columns):
        if name in ("Tree", "Node", DEPTH_COLUMN):
            out[name] = np.asarray(values, dtype=np.int64)
        elif name in ("Split", "Gain", "Cover"):
            out[name] = np.asarray(values, dtype=np.float64)
        else:
            out[name] = np.asarray(values, dtype=np.str_)
    return out


def hyperparameter_array(value: Any) -> np.ndarray | None:
    """A hyperparameter as smdebug saved it (numbers and strings as shape (1,), lists as arrays), or
    None when it has no faithful array form (None, objects). A dict is saved as its JSON text."""
    if isinstance(value, np.ndarray):
        return value if value.dtype.kind in "biufcUS" else None
    if isinstance(value, (bool, int, float, str, np.generic)):
        return np.asarray([value])
    if isinstance(value, Mapping):
        try:
            return np.asarray([json.dumps(value, sort_keys=True, default=str)])
        except (TypeError, ValueError):
            return None
    if isinstance(value, (list, tuple)):
        if not value:
            return None
        try:
            array = np.asarray(value)
        except (TypeError, ValueError):
            return None
        if array.dtype.kind in "biufcU":
            return array
        if all(isinstance(v, (bool, int, float, str)) for v in value):
            return np.asarray([str(v) for v in value])
        return None
    return None


__all__ = [
    "DEPTH_COLUMN",
    "IMPORTANCE_TYPES",
    "TREE_COLUMNS",
    "average_shap",
    "feature_names",
    "hyperparameter_array",
    "is_increasing_metric",
    "mean_abs_shap",
    "metric_values",
    "normalized_importance",
    "shap_columns",
    "tree_table",
]
