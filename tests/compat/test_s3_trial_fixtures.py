"""Every smdebug fixture, uploaded to S3 (moto's server), reads back through create_trial("s3://...")
exactly as expected.json says: the same checks as test_trial_fixtures.py, run against S3 instead of disk."""

import json
from pathlib import Path
from typing import Any

import pytest

import tests.compat.test_trial_fixtures as on_disk
from sdk_ext.storage.s3 import S3Storage
from sdk_ext.trials import Trial, create_trial

CHECKS = [
    on_disk.test_trial_level_answers_match_smdebug,
    on_disk.test_every_value_shape_and_reduction_matches_smdebug,
    on_disk.test_probes_of_missing_things_raise_what_smdebug_raises,
]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("test_"))
@pytest.mark.parametrize("fixture", on_disk.FIXTURES, ids=lambda p: p.name)
def test_fixture_read_from_s3_matches_smdebug(fixture: Path, check: Any, s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = s3.upload_dir(fixture / "out", f"fixtures/{fixture.name}/out")
    assert keys
    uri = s3.uri(f"fixtures/{fixture.name}/out")
    opened: list[Trial] = []

    def load_from_s3(fx: Path) -> tuple[Trial, dict[str, Any]]:
        trial = create_trial(uri, timeout=0)
        opened.append(trial)
        return trial, json.loads((fx / "expected.json").read_text())

    monkeypatch.setattr(on_disk, "load", load_from_s3)
    s3.proxy.clear()
    check(fixture)
    assert opened and all(isinstance(t.storage, S3Storage) for t in opened)
    assert s3.proxy.count() > 0  # really read over HTTP
