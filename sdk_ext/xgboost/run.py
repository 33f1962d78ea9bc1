"""Run a training script with the zero-change XGBoost hook armed: ``python -m sdk_ext.xgboost.run train.py [args...]``.

The script runs as ``__main__`` with ``sys.argv`` = ``[train.py, args...]``, exactly as ``python train.py``
would run it, plus :func:`sdk_ext.xgboost.zero_change.install` first (a no-op without a hook config).
"""

from __future__ import annotations

import runpy
import sys

from sdk_ext.xgboost.zero_change import install


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stderr.write("usage: python -m sdk_ext.xgboost.run SCRIPT.py [ARGS...]\n")
        raise SystemExit(2)
    install()
    sys.argv = list(args)
    runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
