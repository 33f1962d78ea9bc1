"""profilerconfig.json as a training container reads it (SageMaker's keys, its almost-JSON metrics configs)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from sdk_ext.debugger import FrameworkProfile, ProfilerConfig
from sdk_ext.profiler import config


def test_a_request_profiler_config_from_the_sdk_classes_parses_with_its_detailed_window() -> None:
    with pytest.warns(DeprecationWarning):  # FrameworkProfile warns, as SageMaker SDK v2 does
        request = ProfilerConfig(s3_output_path="s3://b/p", system_monitor_interval_millis=100,
                                 framework_profile_params=FrameworkProfile(start_step=3, num_steps=2))._to_request_dict()
    parsed = config.parse(request)
    assert parsed.enabled and parsed.interval_ms == 100
    assert parsed.local_path == "/opt/ml/output/profiler"
    assert parsed.detailed == config.StepWindow(3, 2)
    assert parsed.max_file_size == 10485760 and parsed.close_interval == 60.0


def test_defaults_keys_in_any_case_and_disabling() -> None:
    assert config.parse({}).interval_ms == 500
    assert config.parse({"profilingintervalinmilliseconds": 200}).interval_ms == 200
    assert not config.parse({"DisableProfiler": True}).enabled
    assert not config.parse({"DisableProfiler": "true"}).enabled
    assert config.parse({"DisableProfiler": False}).enabled


def test_bad_values_fall_back_with_a_warning_naming_the_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parsed = config.parse({"ProfilingIntervalInMilliseconds": "soon",
                               "ProfilingParameters": {"RotateMaxFileSizeInBytes": "-3",
                                                       "DetailedProfilingConfig": "{not json"}})
    assert parsed.enabled and parsed.interval_ms == 500 and parsed.max_file_size == 10485760
    assert parsed.detailed is None
    text = caplog.text
    assert "ProfilingIntervalInMilliseconds" in text and "RotateMaxFileSizeInBytes" in text
    assert "DetailedProfilingConfig" in text


def test_missing_file_is_off_quietly_and_a_broken_one_is_off_with_a_reason(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.CONFIG_ENV, str(tmp_path / "none.json"))
    with caplog.at_level(logging.WARNING):
        assert not config.load().enabled
    assert caplog.text == ""
    broken = tmp_path / "profilerconfig.json"
    broken.write_text("[1, 2")
    with caplog.at_level(logging.WARNING):
        assert not config.load(broken).enabled
    assert str(broken) in caplog.text and "profiling is off" in caplog.text
    broken.write_text(json.dumps({"ProfilingIntervalInMilliseconds": 1000}))
    assert config.load(broken).interval_ms == 1000


def test_step_window_covers_its_steps_only() -> None:
    window = config.StepWindow(5, 2)
    assert [s for s in range(10) if window.covers(s)] == [5, 6]
