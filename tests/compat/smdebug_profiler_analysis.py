"""Run by real smdebug 1.0.34's interpreter (tests/compat/test_profiler_analysis_smdebug.py): smdebug's
PandasFrameAnalysis over the frames given (JSON, pandas' "split" orient), every query's answer printed as JSON.

    python smdebug_profiler_analysis.py SYSTEM_JSON FRAMEWORK_JSON
"""

import io
import json
import sys

import pandas as pd
from smdebug.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, Resource, StatsBy


def frame(value):
    if value is None:
        return None
    return {"columns": [str(c) for c in value.columns], "rows": json.loads(value.to_json(orient="values"))}


def main() -> None:
    system, framework = (pd.read_json(io.StringIO(open(p).read()), orient="split") for p in sys.argv[1:3])

    def fresh():
        return PandasFrameAnalysis(system.copy(), framework.copy())

    stats = fresh().get_job_statistics()
    out = {
        "step_" + by.value: frame(fresh().get_step_statistics(by=by)) for by in StatsBy
    }
    out["step_bad_by"] = frame(fresh().get_step_statistics(by="step"))
    out["util"] = frame(fresh().get_utilization_stats())
    out["util_cpu_gpu"] = frame(fresh().get_utilization_stats(resource=[Resource.CPU, Resource.GPU]))
    out["util_phase"] = frame(fresh().get_utilization_stats(by=StatsBy.TRAINING_PHASE))
    out["util_phase_train"] = frame(
        fresh().get_utilization_stats(by=StatsBy.TRAINING_PHASE, phase=["Step:ModeKeys.TRAIN"])
    )
    out["util_bad_resource"] = frame(fresh().get_utilization_stats(resource="cpu"))
    out["usage"] = frame(fresh().get_device_usage_stats())
    out["usage_ranges"] = frame(
        fresh().get_device_usage_stats(device=Resource.CPU, utilization_ranges=[(0, 10), (10, 20), (30, 80), (80, 100)])
    )
    out["usage_bad"] = [
        fresh().get_device_usage_stats(device="cpu").empty,
        fresh().get_device_usage_stats(utilization_ranges=[(30,)]).empty,
        fresh().get_device_usage_stats(utilization_ranges=((0, 10), (10, 90))).empty,
        fresh().get_device_usage_stats(utilization_ranges=[]).empty,
    ]
    out["intervals"] = frame(fresh().get_training_phase_intervals())
    out["intervals_train"] = frame(fresh().get_training_phase_intervals("Step:ModeKeys.TRAIN"))
    out["intervals_bad"] = [
        fresh().get_training_phase_intervals(("Step:ModeKeys.TRAIN",)) is None,
        fresh().get_training_phase_intervals(["Step:ModeKeys.PREDICT"]) is None,
    ]
    out["job"] = {
        k: (v.iloc[0] if isinstance(v, pd.Series) else v).item() if hasattr(
            v.iloc[0] if isinstance(v, pd.Series) else v, "item") else v
        for k, v in stats.__dict__.items()
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
