"""``Tensor.values()`` through the batch decoder gives, for every smdebug fixture, what reading step by step gives.

The fixtures are short (fewer steps than the batch path needs), so these tests lower its threshold
to one step: every ``values()`` call then takes it, for every tensor, mode and worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk_ext.modes import ModeKeys
from sdk_ext.trials import TrialOptions, create_trial
from tests.compat.test_trial_fixtures import FIXTURES
from tests.trial_builder import FakeClock
from tests.unit.trials.test_bulk_values import assert_values_match_step_by_step


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name)
def test_values_match_step_by_step_reads_for_every_tensor_mode_and_worker(
    fixture: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sdk_ext.trials.read.reader.BULK_MIN", 1)
    fast, slow = (create_trial(str(fixture / "out"), options=TrialOptions(clock=FakeClock()), timeout=0)
                  for _ in range(2))
    compared = 0
    for name in fast.tensor_names():
        for mode in (ModeKeys.GLOBAL, *fast.modes()):
            for worker in (None, *fast.workers()):
                compared += assert_values_match_step_by_step(fast, slow, name, mode, worker)
    assert compared > 0 and fast._reads.reader.batched > 0
