"""CheckInputImages: input images that are not normalised (channel means far from zero).

docs/RULES.md#checkinputimages. Tensors matching ``regex`` hold a batch of images with the colour channel on axis
``channel`` (1 for NCHW). Readings chosen where SageMaker documents no exact formula:

* Per tensor, the per-channel sum and count of pixel values accumulate over the steps evaluated,
  as does the number of images (axis 0, the batch; with ``channel`` 0 a tensor is one image); nothing is judged before
  ``threshold_samples`` images have been seen.
* Fires when any channel's mean has ``|mean| > threshold_mean``.
* A tensor without the ``channel`` axis is an error naming the tensor, its shape and the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import BuiltinRule, fmt, is_numeric


def channel_sums(images: np.ndarray, channel: int) -> tuple[np.ndarray, np.ndarray]:
    """``(sum, count)`` of the values of each channel (every axis but ``channel`` reduced)."""
    images = np.asarray(images, dtype=np.float64)
    per_channel = np.moveaxis(images, channel, 0).reshape(images.shape[channel], -1)
    return per_channel.sum(axis=1), np.full(per_channel.shape[0], per_channel.shape[1], dtype=np.float64)


@dataclass
class _Tally:
    sums: np.ndarray
    counts: np.ndarray
    images: int = 0


class CheckInputImages(BuiltinRule):
    """Fires when an input image channel's mean, over ``threshold_samples`` images, exceeds ``threshold_mean``."""

    judges_on_selection = False  # nothing is judged before ``threshold_samples`` images were seen

    def __init__(
        self,
        base_trial: Any,
        threshold_mean: float | str = 0.2,
        threshold_samples: int | str = 500,
        regex: str | list[str] = ".*hybridsequential0_input_0",
        channel: int | str = 1,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        p = self.params
        self.threshold_mean = p.number("threshold_mean", threshold_mean, ge=0)
        self.threshold_samples = p.integer("threshold_samples", threshold_samples, ge=1)
        self.regex = p.regexes("regex", regex)
        self.channel = p.integer("channel", channel, ge=0)
        p.require(bool(self.regex), f"parameter regex={regex!r}: must not be empty")
        p.done()
        self._tallies: dict[str, _Tally] = {}

    def needs_to_judge(self) -> str:
        most = max((t.images for t in self._tallies.values()), default=0)
        return (f"threshold_samples={self.threshold_samples} images of one tensor (it saw at most {most}): save "
                "the inputs more often, or lower threshold_samples")

    def invoke_at_step(self, step: int) -> bool:
        for name in self.select(step, regex=self.regex, all_if_empty=False):
            images = self.value(name, step)
            if images is None or not is_numeric(images):
                continue
            if images.ndim < 2 or self.channel >= images.ndim:
                raise ValueError(f"{self.rule_name}: tensor {name!r} has shape {images.shape}, which has no "
                                 f"channel axis {self.channel} (parameter channel={self.channel!r}) and a batch axis")
            sums, counts = channel_sums(images, self.channel)
            tally = self._tallies.get(name)
            if tally is None or tally.sums.shape != sums.shape:
                tally = self._tallies[name] = _Tally(np.zeros_like(sums), np.zeros_like(counts))
            tally.sums += sums
            tally.counts += counts
            tally.images += images.shape[0] if self.channel != 0 else 1  # channel 0: one CHW image
            if tally.images < self.threshold_samples:
                continue
            self.judged([name])
            means = tally.sums / np.maximum(tally.counts, 1)
            worst = int(np.argmax(np.abs(means)))
            if abs(means[worst]) > self.threshold_mean:
                return self.found_issue(
                    f"tensor {name!r}: channel {worst} has mean {fmt(float(means[worst]))} over {tally.images} "
                    f"images, |mean| above threshold_mean {fmt(self.threshold_mean)} (inputs are not normalised)"
                )
        return False
