"""status.json: atomic, bounded, round-trips; exit codes follow the status."""

from __future__ import annotations

import json

import pytest

from sdk_ext.rules.status import EXIT_CODES, RuleStatus, read_status, write_status


def test_round_trip_and_fields(tmp_path):
    path = write_status(tmp_path / "out", RuleStatus("cfg", "IssuesFound", "RuleEvaluationConditionMet: x\n", 500))
    doc = json.loads(path.read_text())
    assert set(doc) == {"RuleConfigurationName", "RuleEvaluationStatus", "StatusDetails", "LastModifiedTime", "Step"}
    assert doc["LastModifiedTime"].endswith("Z") and doc["Step"] == 500
    back = read_status(tmp_path / "out")
    assert back is not None and back.status == "IssuesFound" and back.step == 500 and back.exit_code == 3
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["status.json"]  # no temporary left behind


def test_details_are_cut_to_1024_characters(tmp_path):
    write_status(tmp_path, RuleStatus("cfg", "Error", "x" * 5000))
    assert len(json.loads((tmp_path / "status.json").read_text())["StatusDetails"]) == 1024


def test_missing_status_and_bad_status_names(tmp_path):
    assert read_status(tmp_path) is None
    with pytest.raises(ValueError, match="not one of"):
        RuleStatus("cfg", "Done")
    assert EXIT_CODES == {"NoIssuesFound": 0, "Error": 2, "IssuesFound": 3, "Stopped": 4}
