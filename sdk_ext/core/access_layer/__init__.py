"""``smdebug.core.access_layer``: whether a trial's training has ended, and marking it so."""

from sdk_ext.core.access_layer.utils import has_training_ended, training_has_ended

__all__ = ["has_training_ended", "training_has_ended"]
