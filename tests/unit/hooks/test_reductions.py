import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from sdk_ext.hooks.reductions import reduce_numpy


def test_norms_are_element_wise_for_every_rank() -> None:
    m = np.array([[3.0, -4.0], [0.0, 12.0]], dtype=np.float32)
    assert reduce_numpy(m, "l2")[0] == pytest.approx(13.0)  # Frobenius, not the spectral norm
    assert reduce_numpy(m, "l1")[0] == pytest.approx(19.0)  # sum |x|, not the largest column sum
    cube = np.ones((2, 3, 4))
    assert reduce_numpy(cube, "l2")[0] == pytest.approx(np.sqrt(24))  # smdebug failed on 3-D


def test_std_and_variance_are_population_statistics() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert reduce_numpy(x, "variance")[0] == pytest.approx(1.25)
    assert reduce_numpy(x, "std")[0] == pytest.approx(np.sqrt(1.25))


def test_results_are_shape_1_in_numpys_result_dtype() -> None:
    r = reduce_numpy(np.ones((2, 2), np.float32), "mean")
    assert r.shape == (1,) and r.dtype == np.float32
    assert reduce_numpy(np.array([1, 2]), "mean").dtype == np.float64
    assert reduce_numpy(np.array([True, False]), "max").dtype == np.bool_
    assert reduce_numpy(np.array([True, True, False]), "sum")[0] == 2


def test_abs_applies_before_the_op() -> None:
    x = np.array([-5.0, 2.0])
    assert reduce_numpy(x, "max", abs=True)[0] == 5.0
    assert reduce_numpy(x, "mean", abs=True)[0] == 3.5


def test_strings_and_empty_tensors_cannot_be_reduced() -> None:
    with pytest.raises(TypeError):
        reduce_numpy(np.array(["a"]), "mean")
    with pytest.raises(ValueError):
        reduce_numpy(np.zeros((0, 3)), "max")


@given(arrays(np.float64, array_shapes(max_dims=4, max_side=5), elements=st.floats(-1e6, 1e6)))
def test_l2_equals_the_norm_of_the_flattened_tensor(x: np.ndarray) -> None:  # type: ignore[type-arg]
    assert reduce_numpy(x, "l2")[0] == pytest.approx(np.sqrt(np.sum(x.reshape(-1) ** 2)), rel=1e-9, abs=1e-9)
    assert reduce_numpy(x, "l1")[0] == pytest.approx(np.sum(np.abs(x)), rel=1e-9, abs=1e-9)
