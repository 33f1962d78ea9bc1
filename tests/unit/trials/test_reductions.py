import numpy as np
import pytest

from sdk_ext.trials.reductions import compute_reduction


def test_norms_of_a_matrix_are_element_wise():
    # smdebug's reader: max column sum (5.0) and spectral norm (~4.3) for l1/l2 of a 2-D tensor
    m = np.array([[3.0, -1.0], [0.0, 4.0]])
    assert compute_reduction("l1", m) == pytest.approx(8.0)
    assert compute_reduction("l2", m) == pytest.approx(np.sqrt(26.0))
    assert compute_reduction("l2", -m, abs=True) == compute_reduction("l2", m)


def test_norm_of_a_matrix_with_nan_is_nan_not_linalg_error():
    # smdebug's reader raised numpy's LinAlgError ("SVD did not converge") here
    m = np.array([[1.0, np.nan], [0.0, 2.0]], dtype=np.float32)
    assert np.isnan(compute_reduction("l2", m))
    assert compute_reduction("l2", np.array([[1.0, np.inf]])) == np.inf


def test_scalars_and_vectors():
    assert compute_reduction("l2", np.array(-3.0)) == 3.0
    assert compute_reduction("l1", np.array([1.0, -2.0])) == 3.0
    assert compute_reduction("std", np.array([1.0, 3.0])) == 1.0  # N, not N-1
