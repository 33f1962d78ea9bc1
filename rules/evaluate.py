"""The rule container's entry point: ``python evaluate.py`` runs :mod:`sdk_ext.evaluator` (see rules/README.md).

The evaluator itself ships in the package (``python -m sdk_ext.evaluator`` is the same program); this file
is what the Dockerfile copies to /opt/sdk_ext/evaluate.py and what a checkout runs as rules/evaluate.py.
"""

import sys

from sdk_ext.evaluator import main

if __name__ == "__main__":
    sys.exit(main())
