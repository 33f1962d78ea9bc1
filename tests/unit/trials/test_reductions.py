import numpy as np
import pytest

from sdk_ext.trials.reductions import compute_reduction


def test_spectral_norm_of_a_matrix_with_nan_is_nan_not_linalg_error():
    # smdebug's reader raised numpy's LinAlgError ("SVD did not converge") here
    m = np.array([[1.0, np.nan], [0.0, 2.0]], dtype=np.float32)
    assert np.isnan(compute_reduction("l2", m))


def test_spectral_norm_of_a_matrix_with_inf_is_inf():
    m = np.array([[1.0, np.inf], [0.0, 2.0]])
    assert compute_reduction("l2", m) == np.inf
    assert compute_reduction("l2", -m, abs=True) == np.inf


def test_finite_matrix_keeps_smdebugs_matrix_norms():
    m = np.array([[3.0, -1.0], [0.0, 4.0]])
    assert compute_reduction("l2", m) == pytest.approx(np.linalg.norm(m, 2))
    assert compute_reduction("l1", m) == pytest.approx(5.0)  # max absolute column sum
