"""The XGBoost hook: a ``TrainingCallback`` that saves what smdebug's XGBoost hook saved, correctly.

    hook = sdk_ext.xgboost.Hook(out_dir, include_collections=["metrics", "feature_importance"],
                                validation_data=dvalid, train_data=dtrain)
    xgb.train(params, dtrain, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[hook])
    XGBClassifier(callbacks=[hook]).fit(X, y, eval_set=[(X, y), (X_val, y_val)])   # the sklearn API

One step per boosting round (step = the round), every step in GLOBAL mode, as smdebug did. Training
and validation metrics are told apart by their evaluation set's name (``train-rmse`` vs
``validation-rmse``): rules pair ``train-<metric>`` with ``<other set>-<metric>``.

Collections and names (smdebug's; see :mod:`sdk_ext.xgboost.model` for what each holds):
``hyperparameters/<name>``, ``metrics`` and ``losses`` (``<set>-<metric>``; increasing metrics are
never losses), ``predictions`` and ``labels`` (of ``validation_data``), ``feature_importance/<type>/<f>``,
``average_shap/<f>`` (signed mean, smdebug's meaning), ``mean_abs_shap/<f>`` (new: mean absolute SHAP),
``full_shap/<f>`` (the feature's column), ``trees/<column>`` (the trees the round added, plus
``trees/Depth``, new). Always saved, as in smdebug: ``metrics``, every 10 rounds unless the save config
(or a ``metrics`` collection configuration) says otherwise. ``losses`` is saved when it is included.

Cost: metrics cost nothing measurable; predictions one predict on ``validation_data``; SHAP one
``predict(pred_contribs=True)`` on ``train_data`` per saved round (that is its price); trees dump only
the round's trees. Nothing is computed for a collection that is not saved at the round.

Failure policy: the constructor raises ConfigError for a bad configuration. After that, nothing
raises into training: a value that cannot be saved is skipped with one warning per name, anything
else disables the hook (logged once) and training goes on.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import xgboost as xgb

from sdk_ext.hooks import json_config, registry
from sdk_ext.hooks.collections import CollectionKeys
from sdk_ext.hooks.hook import Hook as BaseHook
from sdk_ext.hooks.hook import guarded
from sdk_ext.hooks.save_config import SaveConfig
from sdk_ext.modes import ModeKeys
from sdk_ext.xgboost import model as xmodel
from sdk_ext.xgboost.data import to_dmatrix

logger = logging.getLogger(__name__)

#: The new collection of mean absolute SHAP values (``mean_abs_shap/<feature>``).
MEAN_ABS_SHAP = "mean_abs_shap"
DEFAULT_SAVE_INTERVAL = 10  # smdebug's XGBoost default

K = CollectionKeys
#: Built-in collections of the XGBoost hook and their regexes. ``metrics`` and ``losses`` have none:
#: evaluation set and metric names are free-form, so the hook names each tensor it saves there.
XGBOOST_COLLECTIONS: dict[str, tuple[str, ...]] = {
    K.ALL: (),
    K.DEFAULT: (),
    K.HYPERPARAMETERS: (r"^hyperparameters/",),
    K.METRICS: (),
    K.LOSSES: (),
    K.PREDICTIONS: (r"^predictions$",),
    K.LABELS: (r"^labels$",),
    K.FEATURE_IMPORTANCE: (r"^feature_importance/",),
    K.AVERAGE_SHAP: (r"^average_shap/",),
    MEAN_ABS_SHAP: (r"^mean_abs_shap/",),
    K.FULL_SHAP: (r"^full_shap/",),
    K.TREES: (r"^trees/",),
}
_TREE_BOOSTERS = ("gbtree", "dart")


class Hook(BaseHook, xgb.callback.TrainingCallback):
    """Saves an XGBoost training job's metrics, predictions, importances, SHAP values and trees.

    Args (beyond :class:`sdk_ext.hooks.Hook`'s, which all apply):
        hyperparameters: saved under ``hyperparameters/<name>`` (numbers and strings as one-element
            arrays, lists as arrays, dicts as JSON text); under the zero-change path, the training's
            params when not given.
        train_data: data for SHAP values: an ``xgboost.DMatrix``, ``(path, "csv" | "libsvm")`` or ``(X, y)``.
        validation_data: data for ``predictions`` and ``labels``, same forms.
    """

    builtin_collections = XGBOOST_COLLECTIONS
    # smdebug's XGBoost default: metrics only. A collection included by default is saved at the hook's
    # save config; were it ``losses`` too, a debughookconfig.json naming metrics at interval 3 would also
    # save losses every 10 rounds: steps holding no labels nor predictions, in a trial whose config never
    # asked for them.
    default_include_collections = (K.METRICS,)
    #: Rounds are GLOBAL-mode steps (as smdebug saved them); the step timeline shows them as training steps.
    timeline_global_mode = ModeKeys.TRAIN

    def __init__(
        self,
        out_dir: Any,
        export_tensorboard: bool = False,
        tensorboard_dir: str | None = None,
        dry_run: bool = False,
        reduction_config: Any = None,
        save_config: Any = None,
        include_regex: Iterable[str] | str | None = None,
        include_collections: Iterable[str] | str | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        hyperparameters: Mapping[str, Any] | None = None,
        train_data: Any = None,
        validation_data: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            out_dir, export_tensorboard=export_tensorboard, tensorboard_dir=tensorboard_dir, dry_run=dry_run,
            reduction_config=reduction_config,
            save_config=SaveConfig(save_interval=DEFAULT_SAVE_INTERVAL) if save_config is None else save_config,
            include_regex=include_regex, include_collections=include_collections, save_all=save_all,
            include_workers=include_workers, **kwargs,
        )
        self._labels: np.ndarray | None = None
        self._train_data: Any = None
        self._validation_data: Any = None
        self.train_data = train_data
        self.validation_data = validation_data
        self._warned: set[str] = set()
        self._hyperparameters: dict[str, Any] | None = None
        self._hyper_arrays: dict[str, np.ndarray] = {}
        self.set_hyperparameters(hyperparameters)
        self._booster_type = "gbtree"
        self._step_offset = 0

    # smdebug's docs set these after creating the hook from the config (``hook.train_data = dtrain``,
    # ``hook.hyperparameters = params``): assigning them is the same as passing them to the constructor.

    @property
    def train_data(self) -> Any:
        """The DMatrix SHAP values are computed on; assign a DMatrix, ``(path, "csv" | "libsvm")`` or ``(X, y)``.

        Raises (on assignment):
            ConfigError: a value of none of those forms.
        """
        return self._train_data

    @train_data.setter
    def train_data(self, data: Any) -> None:
        self._train_data = to_dmatrix(data, "train_data")

    @property
    def validation_data(self) -> Any:
        """The DMatrix of ``predictions`` and ``labels``; assigned as :attr:`train_data`."""
        return self._validation_data

    @validation_data.setter
    def validation_data(self, data: Any) -> None:
        self._validation_data = to_dmatrix(data, "validation_data")
        self._labels = None

    @property
    def hyperparameters(self) -> dict[str, Any] | None:
        """What ``hyperparameters/<name>`` holds; assigning a dict is :meth:`set_hyperparameters`."""
        return self._hyperparameters

    @hyperparameters.setter
    def hyperparameters(self, hyperparameters: Mapping[str, Any] | None) -> None:
        self.set_hyperparameters(hyperparameters)

    @classmethod
    def create_from_json_file(cls, json_file_path: Any = None, *, path: Any = None) -> Hook:
        """As :meth:`sdk_ext.hooks.Hook.create_from_json_file` (the process's hook when it was created from
        the same file); rounds are saved every 10 unless the configuration says otherwise (smdebug's
        XGBoost default).

        Raises:
            ConfigError: the file is missing or invalid (every problem, each naming its key).
        """
        file = json_config.config_path(json_file_path if json_file_path is not None else path)
        with registry.lock:
            existing = registry.current()
            if isinstance(existing, cls) and registry.same_config_file(existing, file):
                return existing
            config = load_config_defaults(json_config.load_config_file(file))
            kwargs = json_config.hook_kwargs_from_config(config, builtin=cls.builtin_collections)
            logger.info("sdk_ext XGBoost hook configured from %s: out_dir %s", file, kwargs["out_dir"])
            hook = cls(kwargs.pop("out_dir"), **kwargs)
            hook.config_file = os.path.realpath(file)
            return hook

    def set_hyperparameters(self, hyperparameters: Mapping[str, Any] | None) -> None:
        """Set what ``hyperparameters/<name>`` holds (the zero-change path passes the training's params)."""
        if hyperparameters is None:
            self._hyperparameters, self._hyper_arrays = None, {}
            return
        if not isinstance(hyperparameters, Mapping):
            self._warn(
                "hyperparameters-type", "hyperparameters must be a dict, got %s; not saving hyperparameters",
                type(hyperparameters).__name__)
            return
        self._hyperparameters = dict(hyperparameters)
        arrays = {}
        for key, value in self._hyperparameters.items():
            array = xmodel.hyperparameter_array(value)
            if array is None:
                self._warn(f"hp:{key}", "hyperparameter %r = %r has no array form; it is not saved", key, value)
                continue
            arrays[f"hyperparameters/{key}"] = array
        self._hyper_arrays = arrays

    # --- xgboost.callback.TrainingCallback ---------------------------------------------------------

    def before_training(self, model: Any) -> Any:
        self._before_training(model)
        return model

    def before_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        """With profiling on, the round's step in the step timeline starts here. Never asks to stop."""
        self._round_starts()
        return False

    def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        """Save this round (if the save config says so). Never asks to stop training."""
        self._after_iteration(model, epoch, evals_log)
        return False

    def after_training(self, model: Any) -> Any:
        self._after_training()
        return model

    # --- internals ---------------------------------------------------------------------------------

    def _distributed_info(self) -> tuple[int, int]:
        try:
            return int(xgb.collective.get_rank()), int(xgb.collective.get_world_size())
        except Exception:  # noqa: BLE001 - no collective communicator: a single worker
            return 0, 1

    def _warn(self, key: str, msg: str, *args: object) -> None:
        """Log ``msg`` once per ``key`` (each kind of skipped value is said once, not every round)."""
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(msg, *args)

    @guarded
    def _before_training(self, model: Any) -> None:
        if not isinstance(model, xgb.Booster):
            return  # xgb.cv: the folds' boosters, packed
        try:
            config = json.loads(model.save_config())
            self._booster_type = str(config["learner"]["gradient_booster"]["name"])
        except (KeyError, ValueError, TypeError, xgb.core.XGBoostError):
            self._booster_type = "gbtree"

    @guarded
    def _round_starts(self) -> None:
        if not self._worker_ready:
            self._setup_worker()  # the step timeline, if profiling is on, must see the first round start
        if self._timeline is not None:
            self._timeline.start_next()

    @guarded
    def _after_training(self) -> None:
        if self._in_step:
            self._end_step()
        self.flush()

    @guarded
    def _after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Any]) -> None:
        step = int(epoch) + self._step_offset
        last = self._steps.current.global_step
        if step <= last:  # a second training with the same hook (e.g. fit() called again)
            self._warn("restart", "sdk_ext XGBoost hook: round %d follows step %d of an earlier training; this "
                       "training's rounds are saved as steps %d on", epoch, last, last + 1)
            self._step_offset += last + 1 - step
            step = last + 1
        self._explicit_steps = True
        self._begin_step(step)
        try:
            if self.policy.active:
                self._save_round(model, epoch, evals_log or {})
        finally:
            self._end_step()

    def _included(self) -> set[str]:
        names = set(self.policy.include_collections)
        return set(self.collection_manager.get_collections()) if K.ALL in names else names

    def _wants(self, collections: Iterable[str], probe: str, included: set[str]) -> bool:
        """Whether an active, included collection claims ``probe`` (a name of the group) this step."""
        active = self.policy.active
        wanted = set(collections)
        for name in included & active:
            if name in wanted or self.collection_manager.get(name).matches(probe):
                return True
        return False

    def _put(self, name: str, value: np.ndarray, claimed: tuple[str, ...], included: set[str]) -> bool:
        plan = self.policy.plan(name, tuple(c for c in claimed if c in included))
        if plan is None:
            return False
        self._save(name, plan, value)
        return True

    def _save_round(self, model: Any, epoch: int, evals_log: Mapping[str, Any]) -> None:
        included = self._included()
        for name, metric, value in xmodel.metric_values(evals_log):  # cheap: always offered to the policy
            loss = not xmodel.is_increasing_metric(metric)
            claimed = (K.METRICS, K.LOSSES) if loss else (K.METRICS,)
            saved = self._put(name, np.asarray([value], dtype=np.float64), claimed, included)
            if saved and loss and K.LOSSES not in included:
                # Listed under ``losses`` too, without a schedule of its own: the loss rules (LossNotDecreasing,
                # Overfit, Overtraining) read the losses of a trial whose config named only metrics, where
                # smdebug's ``losses`` stayed empty and those rules judged nothing.
                if self.collection_manager.get(K.LOSSES).record_saved(name):
                    self.policy.names_changed = True
        if not isinstance(model, xgb.Booster):  # xgb.cv
            if included - {K.METRICS, K.LOSSES, K.DEFAULT}:
                self._warn("cv", "sdk_ext XGBoost hook: under xgb.cv only metrics are saved (mean and std over the "
                           "folds); the folds' models are not one model")
            return
        features = xmodel.feature_names(model.feature_names, model.num_features())
        first = features[0] if features else "f0"

        if self._wants((K.HYPERPARAMETERS,), "hyperparameters/x", included):
            if self.hyperparameters is None:
                self._warn("no-hyperparameters", "the hyperparameters collection is saved but the hook was given no "
                           "hyperparameters: pass Hook(hyperparameters=params)")
            for name, array in self._hyper_arrays.items():
                self._put(name, array, (K.HYPERPARAMETERS,), included)

        want_pred = self._wants((K.PREDICTIONS,), "predictions", included)
        want_labels = self._wants((K.LABELS,), "labels", included)
        if want_pred or want_labels:
            if self.validation_data is None:
                self._warn("no-validation", "predictions and labels are saved from validation_data, which the hook "
                           "was not given: pass Hook(validation_data=DMatrix | (X, y) | (path, 'csv'))")
            else:
                if want_pred:
                    self._put("predictions", np.asarray(model.predict(self.validation_data)), (K.PREDICTIONS,),
                              included)
                if want_labels:
                    labels = self._validation_labels()
                    if labels is not None:
                        self._put("labels", labels, (K.LABELS,), included)

        tree_model = self._booster_type in _TREE_BOOSTERS
        if self._wants((K.FEATURE_IMPORTANCE,), f"feature_importance/weight/{first}", included):
            if not tree_model:
                self._warn("importance-booster", "feature importance is defined for tree boosters only, not %s; "
                           "not saved", self._booster_type)
            else:
                for kind in xmodel.IMPORTANCE_TYPES:
                    shares = xmodel.normalized_importance(model.get_score(importance_type=kind), features)
                    for name, share in shares.items():
                        self._put(f"feature_importance/{kind}/{name}", np.asarray([share], dtype=np.float64),
                                  (K.FEATURE_IMPORTANCE,), included)

        shap_groups = [(K.FULL_SHAP, "full_shap"), (K.AVERAGE_SHAP, "average_shap"), (MEAN_ABS_SHAP, "mean_abs_shap")]
        wanted_shap = [(c, p) for c, p in shap_groups if self._wants((c,), f"{p}/{first}", included)]
        if wanted_shap:
            if self.train_data is None:
                self._warn("no-train", "SHAP values are computed on train_data, which the hook was not given: pass "
                           "Hook(train_data=DMatrix | (X, y) | (path, 'csv'))")
            else:
                contribs = np.asarray(model.predict(self.train_data, pred_contribs=True))
                for feature, shap_column in xmodel.shap_columns(contribs, features).items():
                    for coll, prefix in wanted_shap:
                        shap = (shap_column if coll == K.FULL_SHAP else xmodel.average_shap(shap_column)
                                if coll == K.AVERAGE_SHAP else xmodel.mean_abs_shap(shap_column))
                        self._put(f"{prefix}/{feature}", shap, (coll,), included)

        if self._wants((K.TREES,), "trees/Node", included):
            if not tree_model:
                self._warn("trees-booster", "trees are saved for tree boosters only, not %s", self._booster_type)
            else:
                for tree_column, values in self._round_trees(model, epoch).items():
                    self._put(f"trees/{tree_column}", values, (K.TREES,), included)

    def _validation_labels(self) -> np.ndarray | None:
        if self._labels is None:
            labels = np.asarray(self.validation_data.get_label())
            if labels.size == 0:
                self._warn("no-labels", "validation_data has no labels; labels are not saved (rules that compare "
                           "labels with predictions cannot run)")
                return None
            self._labels = labels
        return self._labels

    def _round_trees(self, model: Any, epoch: int) -> dict[str, np.ndarray]:
        rounds = model.num_boosted_rounds()
        r = min(int(epoch), rounds - 1)
        try:
            dumps = model[r:r + 1].get_dump(dump_format="json", with_stats=True)
            first = r * len(dumps)
        except (xgb.core.XGBoostError, ValueError, IndexError):  # a booster that cannot be sliced
            every = model.get_dump(dump_format="json", with_stats=True)
            per_round = max(len(every) // max(rounds, 1), 1)
            first = r * per_round
            dumps = every[first:first + per_round]
        return xmodel.tree_table(dumps, first)


def load_config_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (a DebugHookConfig) with smdebug's XGBoost default save interval when it sets none."""
    params = dict(config.get("HookParameters") or {})
    if not any(k.endswith("save_interval") for k in params):
        params["save_interval"] = str(DEFAULT_SAVE_INTERVAL)
    return {**config, "HookParameters": params}


__all__ = ["DEFAULT_SAVE_INTERVAL", "MEAN_ABS_SHAP", "XGBOOST_COLLECTIONS", "Hook", "load_config_defaults"]
