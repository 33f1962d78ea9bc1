import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import Collection, CollectionManager, ReductionConfig, SaveConfig, SavePolicy
from sdk_ext.hooks.collections import BUILTIN_REGEXES
from sdk_ext.hooks.reduction_config import RAW_ONLY
from sdk_ext.modes import ModeKeys


def policy(manager: CollectionManager, include: list[str], **kw: object) -> SavePolicy:
    return SavePolicy(
        manager,
        include_collections=include,
        save_config=kw.get("save_config", SaveConfig(save_interval=1)),  # type: ignore[arg-type]
        reduction_config=kw.get("reduction_config", RAW_ONLY),  # type: ignore[arg-type]
        builtin=BUILTIN_REGEXES,
    )


def test_builtin_regexes_sort_pytorch_names() -> None:
    m = CollectionManager.with_builtins()
    assert m.get("weights").matches("Net_fc1.weight")
    assert not m.get("weights").matches("gradient/Net_fc1.weight")
    assert m.get("gradients").matches("gradient/Net_fc1.weight")
    assert m.get("biases").matches("Net_fc1.bias")
    assert m.get("losses").matches("CrossEntropyLoss_output_0")
    assert not m.get("losses").matches("CrossEntropyLoss_input_0")


def test_bad_regex_is_a_config_error_naming_the_collection() -> None:
    with pytest.raises(ConfigError, match=r"collection 'relu'.*not a valid Python regex"):
        Collection("relu", include_regex=["(unclosed"])


def test_an_included_name_becomes_a_collection_to_fill_later_and_empty_ones_are_listed() -> None:
    m = CollectionManager.with_builtins()
    p = policy(m, ["activations", "losses"])
    p.prepare()
    assert "activations" in m and p.empty_included() == ["activations"]
    m.get("activations").include("relu")
    assert p.empty_included() == []
    assert p.begin_step(ModeKeys.TRAIN, 0) and p.plan("relu_output_0") is not None
    m.add(Collection("empty"))  # not included: not listed
    assert policy(m, ["losses"]).empty_included() == []


def test_plan_is_the_union_of_active_including_collections() -> None:
    m = CollectionManager.with_builtins()
    m.add(Collection("weights", include_regex=["weight"],
                     reduction_config=ReductionConfig(reductions=["mean"], norms=["l2"], save_shape=True)))
    m.add(Collection("big", include_regex=["fc1"], reduction_config=ReductionConfig(reductions=["max", "mean"], save_raw_tensor=True)))
    p = policy(m, ["weights", "big"])
    assert p.begin_step(ModeKeys.TRAIN, 0)
    plan = p.plan("fc1.weight")
    assert plan is not None
    assert plan.raw and plan.shape
    assert plan.ops == (("mean", False), ("l2", False), ("max", False))
    assert plan.collections == ("weights", "big")
    assert p.plan("fc2.bias") is None  # biases not included
    # the saved name is recorded as a member (for the collections file)
    assert m.get("weights").tensor_names == {"fc1.weight"} and p.names_changed


def test_collection_interval_and_train_only_collections() -> None:
    m = CollectionManager.with_builtins()
    m.get("weights").save_config = SaveConfig(save_interval=10)
    p = policy(m, ["weights", "gradients"], save_config=SaveConfig(save_interval=5))
    p.begin_step(ModeKeys.TRAIN, 5)
    assert p.plan("fc.weight") is None and p.plan("gradient/fc.weight") is not None
    p.begin_step(ModeKeys.TRAIN, 10)
    assert p.plan("fc.weight") is not None
    p.begin_step(ModeKeys.EVAL, 10)
    assert p.plan("gradient/fc.weight") is None  # no gradients outside training
    assert p.plan("fc.weight") is not None


def test_step_is_saved_only_when_an_included_collection_is_active() -> None:
    m = CollectionManager.with_builtins()
    m.add(Collection("rare", include_regex=["x"], save_config=SaveConfig(save_interval=100)))
    p = policy(m, ["losses"], save_config=SaveConfig(save_interval=3))
    assert not p.begin_step(ModeKeys.TRAIN, 1)
    assert p.begin_step(ModeKeys.TRAIN, 3)
    # an explicitly named collection is honoured even if not included, at its own interval
    assert p.plan("x", ("rare",)) is None
    p.begin_step(ModeKeys.TRAIN, 100)
    assert p.plan("x", ("rare",)) is not None


def test_all_included_means_every_collection() -> None:
    m = CollectionManager.with_builtins()
    m.get("all").include(".*")
    p = policy(m, ["all"])
    p.begin_step(ModeKeys.GLOBAL, 0)
    plan = p.plan("anything")
    assert plan is not None and plan.collections == ("all",)
    assert p.plan("x.bias") is not None and set(p.plan("x.bias").collections) == {"all", "biases"}  # type: ignore[union-attr]


def test_scalar_collections_save_raw_values_without_histograms() -> None:
    m = CollectionManager.with_builtins()
    m.get("losses").reduction_config = ReductionConfig(reductions=["mean"])
    p = policy(m, ["losses"], reduction_config=ReductionConfig(norms=["l2"]))
    p.begin_step(ModeKeys.TRAIN, 0)
    plan = p.plan("MSELoss_output_0")
    assert plan is not None and plan.raw and plan.ops == () and plan.scalar and not plan.histogram
    f = m.to_file(num_workers=1, default_save=SaveConfig(), default_reduction=ReductionConfig(norms=["l2"]))
    assert f.collections["losses"].save_histogram is False
    assert f.collections["weights"].reduction is not None and f.collections["weights"].reduction.reductions == ("l2_norm",)


def test_collection_changes_are_picked_up_before_the_next_step() -> None:
    m = CollectionManager.with_builtins()
    p = policy(m, ["weights"])
    p.begin_step(ModeKeys.TRAIN, 0)
    assert p.plan("layer.w") is None
    m.get("weights").include("layer.w")
    p.begin_step(ModeKeys.TRAIN, 1)
    assert p.plan("layer.w") is not None
