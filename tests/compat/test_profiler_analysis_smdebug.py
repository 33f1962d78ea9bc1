"""sdk_ext's PandasFrameAnalysis answers as real smdebug 1.0.34's does, on a job where smdebug is right (one
training mode, every event inside a step, only utilization series): the same frames go to both, and
every query, wrong-typed arguments included, gives the same table."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest

pd = pytest.importorskip("pandas")

from sdk_ext.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, Resource, StatsBy  # noqa: E402
from sdk_ext.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame  # noqa: E402
from tests.functional.profiler.analysis_job import write_analysis_job  # noqa: E402

SCRIPT = Path(__file__).with_name("smdebug_profiler_analysis.py")


def _frame(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    return {"columns": [str(c) for c in value.columns], "rows": json.loads(value.to_json(orient="values"))}


def ours(system: Any, framework: Any) -> dict[str, Any]:
    def fresh() -> PandasFrameAnalysis:
        return PandasFrameAnalysis(system, framework)

    out: dict[str, Any] = {"step_" + by.value: _frame(fresh().get_step_statistics(by=by)) for by in StatsBy}
    out["step_bad_by"] = _frame(fresh().get_step_statistics(by="step"))  # type: ignore[arg-type]
    out["util"] = _frame(fresh().get_utilization_stats())
    out["util_cpu_gpu"] = _frame(fresh().get_utilization_stats(resource=[Resource.CPU, Resource.GPU]))
    out["util_phase"] = _frame(fresh().get_utilization_stats(by=StatsBy.TRAINING_PHASE))
    out["util_phase_train"] = _frame(
        fresh().get_utilization_stats(by=StatsBy.TRAINING_PHASE, phase=["Step:ModeKeys.TRAIN"]))
    out["util_bad_resource"] = _frame(fresh().get_utilization_stats(resource="cpu"))
    out["usage"] = _frame(fresh().get_device_usage_stats())
    out["usage_ranges"] = _frame(fresh().get_device_usage_stats(
        device=Resource.CPU, utilization_ranges=[(0, 10), (10, 20), (30, 80), (80, 100)]))
    out["usage_bad"] = [
        fresh().get_device_usage_stats(device="cpu").empty,
        fresh().get_device_usage_stats(utilization_ranges=[(30,)]).empty,
        fresh().get_device_usage_stats(utilization_ranges=((0, 10), (10, 90))).empty,
        fresh().get_device_usage_stats(utilization_ranges=[]).empty,
    ]
    out["intervals"] = _frame(fresh().get_training_phase_intervals())
    out["intervals_train"] = _frame(fresh().get_training_phase_intervals("Step:ModeKeys.TRAIN"))
    out["intervals_bad"] = [
        fresh().get_training_phase_intervals(("Step:ModeKeys.TRAIN",)) is None,  # type: ignore[arg-type]
        fresh().get_training_phase_intervals(["Step:ModeKeys.PREDICT"]) is None,
    ]
    out["job"] = {k: (v.item() if hasattr(v, "item") else v) for k, v in fresh().get_job_statistics().items()}
    return out


def same(a: Any, b: Any, where: str = "") -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (where, a, b)
    else:
        assert a == b, (where, a, b)


@pytest.mark.smdebug
def test_every_query_answers_as_smdebugs(tmp_path: Path, smdebug_python: Path) -> None:
    root = write_analysis_job(tmp_path / "job", with_eval=False, outside=False, utilization_only=True)
    pf = PandasFrame(str(root))
    system, framework = pf.get_all_system_metrics(), pf.get_all_framework_metrics()
    files = [tmp_path / "system.json", tmp_path / "framework.json"]
    for frame, file in zip((system, framework), files, strict=True):
        frame.to_json(file, orient="split")
    done = subprocess.run([str(smdebug_python), str(SCRIPT), *map(str, files)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.splitlines()[-1])
    mine = ours(system, framework)
    assert mine["util_phase"] is not None and len(mine["util_phase"]["rows"]) == 2 * 4  # cpu, gpu x before, steps, between, after
    assert len(mine["intervals_train"]["rows"]) == 21
    same(mine, theirs)
