import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import ReductionConfig


def test_csv_round_trip_in_config_order() -> None:
    rc = ReductionConfig.from_csv("abs_l1_norm,min,abs_mean,l2_norm,max")
    assert rc.reductions == ("min", "max")
    assert rc.norms == ("l2",)
    assert rc.abs_reductions == ("mean",)
    assert rc.abs_norms == ("l1",)
    assert rc.csv_names() == ("min", "max", "l2_norm", "abs_mean", "abs_l1_norm")
    assert rc.ops() == (("min", False), ("max", False), ("l2", False), ("mean", True), ("l1", True))
    assert ReductionConfig.from_csv(",".join(rc.csv_names())) == rc


def test_unknown_ops_are_all_reported() -> None:
    with pytest.raises(ConfigError) as err:
        ReductionConfig(reductions=["avg", "mean"], norms=["l3"])
    assert len(err.value.problems) == 2
    assert "'avg'" in str(err.value) and "'l3'" in str(err.value)
    with pytest.raises(ConfigError, match="unknown reduction 'median'"):
        ReductionConfig.from_csv("median")


def test_from_dict_takes_sagemaker_keys_with_json_or_string_booleans() -> None:
    rc = ReductionConfig.from_dict({"reductions": "mean", "save_raw_tensor": "True", "save_shape": False})
    assert rc.save_raw_tensor is True and rc.save_shape is False
    # giving reductions means "only these", as in smdebug
    assert ReductionConfig.from_dict({"reductions": "mean"}).save_raw_tensor is False
    with pytest.raises(ConfigError, match="save_shape must be true or false"):
        ReductionConfig.from_dict({"reductions": "mean", "save_shape": "yes"})


def test_norm_aliases_and_duplicates() -> None:
    rc = ReductionConfig(norms=["l2_norm", "l2", "l1"])
    assert rc.norms == ("l2", "l1")


def test_to_spec_is_what_the_collections_file_holds() -> None:
    spec = ReductionConfig(reductions=["mean"], norms=["l2"], abs_reductions=["max"], save_raw_tensor=True).to_spec()
    assert (spec.reductions, spec.save_raw_tensor, spec.save_shape) == (("mean", "l2_norm", "abs_max"), True, False)


def test_to_json_and_from_json_round_trip_as_in_smdebug() -> None:
    for config in (ReductionConfig(reductions=["min"], norms=["l2"]), ReductionConfig(),
                   ReductionConfig(save_raw_tensor=True, abs_reductions=["max"], save_shape=True)):
        assert ReductionConfig.from_json(config.to_json()) == config
    with pytest.raises(ConfigError, match="reduction config JSON"):
        ReductionConfig.from_json("not json")
