"""Run a Keras training script with the zero-change hook armed: ``python -m sdk_ext.keras.run train.py [args...]``.

The script runs as ``__main__`` with ``sys.argv`` = ``[train.py, args...]``, as ``python train.py`` would,
after :func:`sdk_ext.keras.zero_change.install` (a no-op without a hook config).
"""

from __future__ import annotations

from sdk_ext.hooks.zero_change import run_script
from sdk_ext.keras.zero_change import install


def main(argv: list[str] | None = None) -> None:
    run_script("sdk_ext.keras.run", install, argv)


if __name__ == "__main__":
    main()
