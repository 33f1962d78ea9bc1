"""Run a Keras training script with the zero-change hook armed: ``python -m sdk_ext.keras.run train.py [args...]``.

The script runs as ``__main__`` with ``sys.argv`` = ``[train.py, args...]``, as ``python train.py`` would,
after :func:`sdk_ext.keras.zero_change.install` (a no-op without a hook config).
"""

from __future__ import annotations

import runpy
import sys

from sdk_ext.keras.zero_change import install


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stderr.write("usage: python -m sdk_ext.keras.run SCRIPT.py [ARGS...]\n")
        raise SystemExit(2)
    install()
    sys.argv = list(args)
    runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
