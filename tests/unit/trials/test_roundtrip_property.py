"""Property: whatever the format can hold, a trial written with it reads back bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sdk_ext.modes import ModeKeys
from sdk_ext.storage import InMemoryStorage
from sdk_ext.trials import TrialOptions, create_trial
from tests.trial_builder import TrialBuilder

NUMERIC = [
    "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
]
arrays = st.sampled_from(NUMERIC).flatmap(
    lambda dt: hnp.arrays(np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6))
)
names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda n: "smdebug/reductions/" not in n
)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.dictionaries(
        st.integers(0, 3000), st.dictionaries(names, arrays, min_size=1, max_size=4), min_size=1, max_size=4
    ),
    whole_file_bytes=st.sampled_from([0, 1 << 20]),
    mode=st.sampled_from([ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL]),
)
def test_random_tensors_round_trip_through_a_trial(steps, whole_file_bytes, mode):
    storage = InMemoryStorage()
    b = TrialBuilder(storage)
    b.collections()
    for mode_step, (step, tensors) in enumerate(sorted(steps.items())):
        b.step(step, mode=mode, mode_step=mode_step if mode is not ModeKeys.GLOBAL else step, tensors=tensors)
    b.end()
    trial = create_trial(storage, options=TrialOptions(whole_file_bytes=whole_file_bytes), timeout=0)
    assert trial.steps() == sorted(steps)
    for step, tensors in steps.items():
        for name, value in tensors.items():
            got = trial.tensor(name).value(step)
            assert got.dtype == value.dtype and got.shape == value.shape
            assert got.tobytes() == value.tobytes()
    for name in trial.tensor_names():
        expected = {s: t[name] for s, t in steps.items() if name in t}
        got = trial.tensor(name).values()
        assert sorted(got) == sorted(expected)
        assert all(got[s].tobytes() == expected[s].tobytes() for s in expected)
