"""Reductions, one implementation for what the hooks store and what the reader computes."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from sdk_ext.exceptions import ConfigError, EmptyTensorError, UnsupportedDtypeError
from sdk_ext.format.reductions import reduce
from sdk_ext.hooks import Hook, ReductionConfig
from sdk_ext.trials import create_trial


def test_norms_are_element_wise_for_every_rank() -> None:
    m = np.array([[3.0, -4.0], [0.0, 12.0]], dtype=np.float32)
    assert reduce(m, "l2")[0] == pytest.approx(13.0)  # Frobenius, not the spectral norm
    assert reduce(m, "l1")[0] == pytest.approx(19.0)  # sum |x|, not the largest column sum
    cube = np.ones((2, 3, 4))
    assert reduce(cube, "l2")[0] == pytest.approx(np.sqrt(24))  # smdebug failed on 3-D


def test_std_and_variance_are_population_statistics() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert reduce(x, "variance")[0] == pytest.approx(1.25)
    assert reduce(x, "std")[0] == pytest.approx(np.sqrt(1.25))


def test_results_are_shape_1_in_numpys_result_dtype() -> None:
    r = reduce(np.ones((2, 2), np.float32), "mean")
    assert r.shape == (1,) and r.dtype == np.float32
    assert reduce(np.array([1, 2]), "mean").dtype == np.float64
    assert reduce(np.array([True, False]), "max").dtype == np.bool_
    assert reduce(np.array([True, True, False]), "sum")[0] == 2


def test_abs_applies_before_the_op() -> None:
    x = np.array([-5.0, 2.0])
    assert reduce(x, "max", abs=True)[0] == 5.0
    assert reduce(x, "mean", abs=True)[0] == 3.5


def test_strings_and_empty_tensors_cannot_be_reduced_whatever_the_op() -> None:
    with pytest.raises(UnsupportedDtypeError):  # a TypeError
        reduce(np.array(["a"]), "mean")
    for op in ("max", "mean", "sum", "l1", "l2", "std"):  # numpy alone: an error, nan or 0 depending on op
        with pytest.raises(EmptyTensorError, match="empty tensor"):  # a ValueError
            reduce(np.zeros((0, 3)), op)
    with pytest.raises(ConfigError, match="unknown reduction 'median'"):
        reduce(np.ones(3), "median")


def test_config_spellings_are_accepted() -> None:
    x = np.array([3.0, -4.0])
    assert reduce(x, "l2_norm")[0] == reduce(x, "l2")[0] == 5.0
    assert reduce(x, "var")[0] == reduce(x, "variance")[0]


def test_norms_of_a_matrix_are_element_wise_and_nan_is_nan() -> None:
    # smdebug's reader: max column sum (5.0) and spectral norm (~4.3) for l1/l2 of a 2-D tensor,
    # and numpy's LinAlgError ("SVD did not converge") for a NaN
    m = np.array([[3.0, -1.0], [0.0, 4.0]])
    assert reduce(m, "l1")[0] == pytest.approx(8.0)
    assert reduce(m, "l2")[0] == pytest.approx(np.sqrt(26.0))
    assert reduce(-m, "l2", abs=True)[0] == reduce(m, "l2")[0]
    assert np.isnan(reduce(np.array([[1.0, np.nan], [0.0, 2.0]], dtype=np.float32), "l2")[0])
    assert reduce(np.array([[1.0, np.inf]]), "l2")[0] == np.inf
    assert reduce(np.array(-3.0), "l2")[0] == 3.0
    assert reduce(np.array([1.0, 3.0]), "std")[0] == 1.0  # N, not N-1


def test_a_reduction_reads_the_same_stored_or_computed(tmp_path) -> None:
    """The hook stores ``mean``/``l1``; the reader computes them from the raw value where only that was
    saved: the same numbers."""
    values = {"w": np.array([[1.5, -2.0], [0.25, 4.0]], dtype=np.float32)}
    configs = {"stored": ReductionConfig(reductions=["mean"], norms=["l1"]), "raw": None}
    for out, config in configs.items():
        hook = Hook(str(tmp_path / out), include_regex=["w"], reduction_config=config)
        with hook.step():
            for name, v in values.items():
                hook.save_tensor(name, v)
        hook.close()
    stored, raw = create_trial(str(tmp_path / "stored")), create_trial(str(tmp_path / "raw"))
    for op in ("mean", "l1"):
        assert stored.tensor("w").reduction_value(0, op) == pytest.approx(raw.tensor("w").reduction_value(0, op))


@given(arrays(np.float64, array_shapes(max_dims=4, max_side=5), elements=st.floats(-1e6, 1e6)))
def test_l2_equals_the_norm_of_the_flattened_tensor(x: np.ndarray) -> None:  # type: ignore[type-arg]
    assert reduce(x, "l2")[0] == pytest.approx(np.sqrt(np.sum(x.reshape(-1) ** 2)), rel=1e-9, abs=1e-9)
    assert reduce(x, "l1")[0] == pytest.approx(np.sum(np.abs(x)), rel=1e-9, abs=1e-9)
