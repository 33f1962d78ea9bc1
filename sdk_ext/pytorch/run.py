"""Run a training script with the zero-change hook armed: ``python -m sdk_ext.pytorch.run train.py [args...]``.

The script runs as ``__main__`` with ``sys.argv`` = ``[train.py, args...]``, exactly as ``python train.py``
would run it, plus :func:`sdk_ext.pytorch.zero_change.install` first (a no-op without a hook config).
"""

from __future__ import annotations

from sdk_ext.hooks.zero_change import run_script
from sdk_ext.pytorch.zero_change import install


def main(argv: list[str] | None = None) -> None:
    run_script("sdk_ext.pytorch.run", install, argv)


if __name__ == "__main__":
    main()
