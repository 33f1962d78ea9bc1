"""DataType numbers (TensorFlow's, as the format stores them) and the numpy dtypes they map to.

A tensor record's ``TensorProto.dtype`` is one of these numbers; strings use 0 and ``string_val``.
Decoding gives little-endian numpy dtypes; ``bfloat16`` needs ml_dtypes (stored as number 14).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdk_ext.exceptions import UnsupportedDtypeError

try:  # bfloat16 is not a numpy dtype; ml_dtypes provides one when installed.
    import ml_dtypes as _ml_dtypes

    BFLOAT16: np.dtype[Any] | None = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    BFLOAT16 = None

# DataType numbers (TensorFlow's), as stored in TensorProto.dtype.
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_STRING = 1, 2, 3, 4, 5, 6, 7
DT_COMPLEX64, DT_INT64, DT_BOOL, DT_BFLOAT16 = 8, 9, 10, 14
DT_UINT16, DT_COMPLEX128, DT_HALF, DT_UINT32, DT_UINT64 = 17, 18, 19, 22, 23

_NUMERIC_CODES: dict[str, int] = {
    "float16": DT_HALF,
    "float32": DT_FLOAT,
    "float64": DT_DOUBLE,
    "int8": DT_INT8,
    "int16": DT_INT16,
    "int32": DT_INT32,
    "int64": DT_INT64,
    "uint8": DT_UINT8,
    "uint16": DT_UINT16,
    "uint32": DT_UINT32,
    "uint64": DT_UINT64,
    "bool": DT_BOOL,
    "complex64": DT_COMPLEX64,
    "complex128": DT_COMPLEX128,
}
#: DataType number -> little-endian numpy dtype, for decoding.
CODE_TO_DTYPE: dict[int, np.dtype[Any]] = {
    code: np.dtype(name).newbyteorder("<") for name, code in _NUMERIC_CODES.items()
}
#: numpy dtype name -> DataType number, for encoding. Strings use code 0 and ``string_val``.
DTYPE_TO_CODE: dict[str, int] = dict(_NUMERIC_CODES)
if BFLOAT16 is not None:
    DTYPE_TO_CODE["bfloat16"] = DT_BFLOAT16


def to_numpy(value: object) -> np.ndarray[Any, Any]:
    """Convert a value to the array that gets stored, as smdebug does.

    An ndarray is kept as it is (0-d stays 0-d); a Python or numpy scalar becomes shape ``(1,)``;
    lists and tuples go through ``np.asarray``. Framework tensors are converted by their hooks.
    """
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, int, float, complex, str, bytes, np.generic)):
        return np.array([value])
    return np.asarray(value)


def dtype_code(array: np.ndarray[Any, Any]) -> int:
    """The DataType number for ``array``'s dtype; 0 for strings.

    Raises:
        UnsupportedDtypeError: the dtype has no place in the format (datetime, void, object of non-strings...).
    """
    kind = array.dtype.kind
    if kind in "USO":
        return 0
    code = DTYPE_TO_CODE.get(array.dtype.name)
    if code is None:
        supported = ", ".join(sorted(DTYPE_TO_CODE)) + ", str/bytes"
        raise UnsupportedDtypeError(
            f"cannot save a tensor of dtype {array.dtype}: the format holds {supported}; "
            "convert it first (e.g. value.astype(np.float32))"
        )
    return code


__all__ = ["BFLOAT16", "CODE_TO_DTYPE", "DTYPE_TO_CODE", "dtype_code", "to_numpy"]
