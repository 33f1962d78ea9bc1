"""``smdebug.core.collection``: ``Collection``, ``CollectionKeys`` and smdebug's groups of collection names."""

from sdk_ext.hooks.collections import (
    NON_REDUCTION_COLLECTIONS,
    SCALAR_COLLECTIONS,
    Collection,
    CollectionKeys,
)

#: Collections of summary objects (TensorFlow), saved without reductions or histograms.
SUMMARIES_COLLECTIONS = frozenset({CollectionKeys.TENSORFLOW_SUMMARIES})
#: Collections whose scalars go to SageMaker metrics.
SM_METRIC_COLLECTIONS = frozenset({CollectionKeys.LOSSES, CollectionKeys.METRICS, CollectionKeys.SM_METRICS})
#: Collections saved without histograms (in TensorBoard).
NON_HISTOGRAM_COLLECTIONS = SCALAR_COLLECTIONS | SUMMARIES_COLLECTIONS

__all__ = [
    "NON_HISTOGRAM_COLLECTIONS",
    "NON_REDUCTION_COLLECTIONS",
    "SCALAR_COLLECTIONS",
    "SM_METRIC_COLLECTIONS",
    "SUMMARIES_COLLECTIONS",
    "Collection",
    "CollectionKeys",
]
