"""Run every benchmark module in tests/bench (``python -m tests.bench [args passed to each]``).

Each benchmark module (helpers and profiling loops start with ``_``) provides ``main(argv) -> int``; see its docstring for what it
measures and how to run it alone (``python -m tests.bench.<module>``).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    status = 0
    for module in sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])):
        if module.startswith("_"):
            continue
        print(f"== tests.bench.{module}", file=sys.stderr)
        status |= importlib.import_module(f"tests.bench.{module}").main(argv)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
