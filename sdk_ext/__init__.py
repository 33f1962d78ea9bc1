"""sdk_ext: SageMaker Debugger, rebuilt.

Subpackages: ``debugger`` (job configuration), ``hooks``/``pytorch`` (saving tensors in training),
``trials`` (reading them back), ``rules`` (judging them), ``local`` (the whole loop on one machine).
Importing this package runs nothing else.
"""

import logging

from sdk_ext.modes import ModeKeys

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["ModeKeys", "__version__"]
