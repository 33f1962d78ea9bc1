"""The public names users port their code to (docs/ARCHITECTURE.md, README) exist with the signatures users port their code to."""

import importlib
import inspect

import pytest

from sdk_ext.modes import ModeKeys

CONTRACT = {
    "sdk_ext.debugger": "CollectionConfig DebuggerHookConfig TensorBoardOutputConfig Rule ProfilerRule "
    "ProfilerConfig Profiler rule_configs apply_debugger attach debugger_artifacts_path "
    "tensorboard_artifacts_path rule_statuses wait_for_rules",
    "sdk_ext.trials": "create_trial Trial Tensor",
    "sdk_ext.modes": "ModeKeys",
    "sdk_ext.exceptions": "TensorUnavailableForStep TensorUnavailable StepUnavailable StepNotYetAvailable "
    "NoMoreData RuleEvaluationConditionMet MissingCollectionFiles IndexReaderException SdkExtError",
    "sdk_ext.hooks": "Hook SaveConfig SaveConfigMode ReductionConfig CollectionManager",
    "sdk_ext.pytorch": "Hook",
    "sdk_ext.rules": "Rule invoke_rule VanishingGradient ExplodingTensor SimilarAcrossRuns WeightUpdateRatio "
    "AllZero UnchangedTensor LossNotDecreasing Overfit Overtraining TensorVariance DeadRelu SaturatedActivation "
    "PoorWeightInitialization ClassImbalance Confusion CheckInputImages NLPSequenceRatio StalledTrainingRule "
    "FeatureImportanceOverweight TreeDepth",
}


@pytest.mark.parametrize("module", sorted(CONTRACT))
def test_public_names_exist(module):
    mod = importlib.import_module(module)
    assert [n for n in CONTRACT[module].split() if not hasattr(mod, n)] == []


def test_smdebug_style_mode_names_answer_as_in_smdebug():
    # Code written for smdebug says ``smd.modes.TRAIN`` (import smdebug.pytorch as smd) or ``modes.EVAL``.
    import sdk_ext.pytorch as smd
    from sdk_ext import modes

    assert (modes.TRAIN, modes.EVAL, modes.PREDICT, modes.GLOBAL) == tuple(ModeKeys)
    assert smd.modes.TRAIN is ModeKeys.TRAIN


def test_every_exception_derives_from_the_root():
    import sdk_ext.exceptions as exc

    for name in CONTRACT["sdk_ext.exceptions"].split():
        assert issubclass(getattr(exc, name), exc.SdkExtError)


def test_mode_numbers_are_the_formats():
    assert [(m.name, m.value) for m in ModeKeys] == [("TRAIN", 1), ("EVAL", 2), ("PREDICT", 3), ("GLOBAL", 4)]


def test_signatures_follow_the_originals():
    from sdk_ext.debugger import CollectionConfig, DebuggerHookConfig, TensorBoardOutputConfig
    from sdk_ext.hooks import Hook
    from sdk_ext.rules import invoke_rule
    from sdk_ext.trials import create_trial

    def params(f):
        return list(inspect.signature(f).parameters)

    assert params(CollectionConfig)[:2] == ["name", "parameters"]
    assert params(DebuggerHookConfig)[:4] == [
        "s3_output_path", "container_local_output_path", "hook_parameters", "collection_configs"]
    assert params(TensorBoardOutputConfig)[:2] == ["s3_output_path", "container_local_output_path"]
    assert params(create_trial)[:3] == ["path", "name", "range_steps"]
    assert params(invoke_rule)[:4] == ["rule_obj", "start_step", "end_step", "raise_eval_cond"]
    hook_params = inspect.signature(Hook).parameters
    for name in ("out_dir", "export_tensorboard", "tensorboard_dir", "dry_run", "reduction_config", "save_config",
                 "include_regex", "include_collections", "save_all", "include_workers"):
        assert name in hook_params


def test_invoke_rule_takes_the_rule_by_either_name():
    from sdk_ext.rules import invoke_rule

    with pytest.raises(TypeError, match="takes one rule"):
        invoke_rule()
