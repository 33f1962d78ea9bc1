"""``smdebug.core.utils``: the helpers of smdebug's that user code calls, over sdk_ext's own functions.

``is_s3``, ``get_path_to_collections``, ``make_numpy_array``, ``ensure_dir``, ``remove_file_if_exists``,
``split``. smdebug's internals of the same module (its error-handling agent, telemetry, framework
version checks) have no counterpart: the hooks fail open on their own (see :mod:`sdk_ext.hooks.hook`).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from sdk_ext.exceptions import SMDebugTypeError
from sdk_ext.format.paths import COLLECTIONS_DIR

logger = logging.getLogger(__name__)


def is_s3(path: str) -> tuple[bool, str | None, str | None]:
    """``(True, bucket, key)`` for ``s3://bucket/key`` (key ``""`` for a bare bucket), else ``(False, None, None)``."""
    if not path.startswith("s3://"):
        return False, None, None
    bucket, _, key = path[len("s3://"):].partition("/")
    return True, bucket, key


def get_path_to_collections(directory: str) -> str:
    """Where a trial's collections files are: ``{directory}/collections/000000000/`` (trailing slash)."""
    return os.path.join(directory, COLLECTIONS_DIR, "")


def make_numpy_array(x: Any) -> np.ndarray[Any, Any]:
    """``x`` as an array as smdebug's hooks take values: arrays as they are, a scalar (any numpy scalar,
    number or string) as a 1-element array, tuples and lists as arrays, a dict as a 0-d object array.

    Raises:
        SMDebugTypeError: any other type (say which).
    """
    if isinstance(x, np.ndarray):
        return x
    if np.isscalar(x):
        return np.array([x])
    if isinstance(x, (tuple, list)):
        return np.asarray(x)
    if isinstance(x, dict):
        return np.array(x)
    raise SMDebugTypeError(f"make_numpy_array does not take a {type(x).__name__}: give an array, a scalar, a "
                           "list, a tuple or a dict")


def ensure_dir(file_path: str, is_file: bool = True) -> None:
    """Create the directory of ``file_path`` (or ``file_path`` itself if not ``is_file``) if missing."""
    directory = os.path.dirname(file_path) if is_file else file_path
    if directory:
        os.makedirs(directory, exist_ok=True)


def remove_file_if_exists(file_path: str) -> None:
    if os.path.exists(file_path):
        os.remove(file_path)


def split(comma_separated_string: str) -> list[str]:
    """``"a, b ,c"`` -> ``["a", "b", "c"]``."""
    return [x.strip() for x in comma_separated_string.split(",")]


def get_logger(name: str = "sdk_ext") -> logging.Logger:
    """sdk_ext's logger (smdebug's ``get_logger`` returned its ``smdebug`` logger)."""
    return logging.getLogger(name)


__all__ = ["ensure_dir", "get_logger", "get_path_to_collections", "is_s3", "make_numpy_array",
           "remove_file_if_exists", "split"]
