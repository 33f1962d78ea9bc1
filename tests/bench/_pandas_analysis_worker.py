"""One timed run of the notebook analysis, in a fresh process (run by tests/bench/pandas_analysis.py).

    python _pandas_analysis_worker.py LIBRARY ROOT

LIBRARY: ``sdk_ext`` or ``smdebug`` (smdebug 1.0.34, run by its venv's interpreter). Each library's own
PandasFrame makes the frames (not timed); then PandasFrameAnalysis is built and every query run, each
timed. Prints one JSON line: seconds per part and in all, rows of the frames, peak RSS in MiB.
"""

import json
import logging
import resource
import sys
import time


def main() -> None:
    library, root = sys.argv[1:3]
    logging.disable(logging.INFO)
    if library == "smdebug":
        from smdebug.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, StatsBy
        from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
    else:
        from sdk_ext.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, StatsBy
        from sdk_ext.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
    frames = PandasFrame(root)
    system, framework = frames.get_all_system_metrics(), frames.get_all_framework_metrics()
    parts = {}
    began = time.perf_counter()
    analysis = PandasFrameAnalysis(system, framework)
    parts["constructor (step numbers)"] = time.perf_counter() - began
    queries = {
        "get_step_statistics (3 groupings)": lambda: [analysis.get_step_statistics(by=b) for b in StatsBy],
        "get_utilization_stats": analysis.get_utilization_stats,
        "get_utilization_stats by phase": lambda: analysis.get_utilization_stats(by=StatsBy.TRAINING_PHASE),
        "get_device_usage_stats": analysis.get_device_usage_stats,
        "get_training_phase_intervals": analysis.get_training_phase_intervals,
        "get_job_statistics": analysis.get_job_statistics,
    }
    for name, query in queries.items():
        start = time.perf_counter()
        query()
        parts[name] = time.perf_counter() - start
    total = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": total, "parts": parts, "system_rows": len(system), "framework_rows": len(framework),
                      "rss_mib": peak}))


if __name__ == "__main__":
    main()
