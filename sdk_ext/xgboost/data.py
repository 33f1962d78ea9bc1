"""The hook's ``train_data`` / ``validation_data`` arguments: turned into an ``xgboost.DMatrix`` once.

Accepted (smdebug's forms, plus arrays):

* an ``xgboost.DMatrix``;
* ``(path, content_type)``: a local file (or a directory: its data files, sorted) in ``csv`` (label in
  the first column, no header) or ``libsvm``; content types as SageMaker spells them (``text/csv``,
  ``text/libsvm``, ``text/x-libsvm``);
* ``(X, y)``: anything ``DMatrix(X, label=y)`` takes (numpy, pandas, scipy.sparse); ``y`` may be None.

A bad argument raises :class:`~sdk_ext.exceptions.ConfigError` from the constructor, before training.
"""

from __future__ import annotations

import os
from typing import Any

from sdk_ext.exceptions import ConfigError

_CSV = ("csv", "text/csv")
_LIBSVM = ("libsvm", "text/libsvm", "text/x-libsvm")


def _data_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    return sorted(
        os.path.join(path, f) for f in os.listdir(path)
        if not f.startswith((".", "_")) and os.path.isfile(os.path.join(path, f))
    )


def _from_file(path: str, content_type: str, where: str) -> Any:
    import numpy as np
    import xgboost as xgb

    kind = content_type.strip().lower().split(";")[0].strip()
    if kind not in _CSV + _LIBSVM:
        raise ConfigError(f"{where}: content type {content_type!r} is not csv or libsvm "
                          f"(accepted: {', '.join(_CSV + _LIBSVM)})", where="xgboost hook")
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        raise ConfigError(f"{where}: {path} does not exist (only local files are read)", where="xgboost hook")
    files = _data_files(path)
    if not files:
        raise ConfigError(f"{where}: {path} holds no data file", where="xgboost hook")
    try:
        if kind in _CSV:
            rows = np.concatenate([np.atleast_2d(np.loadtxt(f, delimiter=",", dtype=np.float32, ndmin=2))
                                   for f in files])
            return xgb.DMatrix(rows[:, 1:], label=rows[:, 0])
        if len(files) == 1:
            return xgb.DMatrix(f"{files[0]}?format=libsvm")
        from sklearn.datasets import (
            load_svmlight_files,  # several libsvm files: scikit-learn reads them together
        )

        parts = load_svmlight_files(files)
        import scipy.sparse as sp

        return xgb.DMatrix(sp.vstack(parts[0::2]).tocsr(), label=np.concatenate(parts[1::2]))
    except (OSError, ValueError, xgb.core.XGBoostError, ImportError) as err:
        raise ConfigError(f"{where}: could not read {path} as {kind}: {err}", where="xgboost hook") from err


def to_dmatrix(data: Any, where: str) -> Any:
    """``data`` (see module docstring) as a DMatrix, or None for None.

    Raises:
        ConfigError: naming ``where`` (the argument), what was given and what is accepted.
    """
    import xgboost as xgb

    if data is None or isinstance(data, xgb.DMatrix):
        return data
    if isinstance(data, tuple) and len(data) == 2:
        first, second = data
        if isinstance(first, (str, os.PathLike)) and isinstance(second, str):
            return _from_file(os.fspath(first), second, where)
        try:
            return xgb.DMatrix(first, label=second)
        except (TypeError, ValueError, xgb.core.XGBoostError) as err:
            raise ConfigError(f"{where}: DMatrix(X, label=y) failed for the (X, y) given: {err}",
                              where="xgboost hook") from err
    raise ConfigError(
        f"{where} must be an xgboost.DMatrix, a (file path, 'csv' | 'libsvm') tuple or an (X, y) tuple; "
        f"got {type(data).__name__}", where="xgboost hook")


__all__ = ["to_dmatrix"]
