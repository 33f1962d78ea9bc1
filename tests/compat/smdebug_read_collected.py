"""Run with the smdebug venv's interpreter: dump what real smdebug 1.0.34's profiler readers read from a
profiler output directory, as JSON.

Usage: python smdebug_read_collected.py PROFILER_OUTPUT OUT_JSON  (smdebug logs to stdout, so the result goes to a
file). Imports nothing from sdk_ext: this runs in smdebug's own venv.
"""

import json
import sys

from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
from smdebug.profiler.utils import TimeUnits

END = 4102444800  # 2100-01-01


def main(root, out):
    system = LocalSystemMetricsReader(root).get_events(0, END, unit=TimeUnits.SECONDS)
    framework_reader = LocalAlgorithmMetricsReader(root)
    framework = framework_reader.get_events(0, END, unit=TimeUnits.SECONDS)
    by_step = framework_reader.get_events_by_step(1, 3)
    result = {
        "system": [[e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in system],
        "framework": [[e.event_name, e.start_time, e.duration, e.node_id, e.event_args] for e in framework],
        "steps_1_to_3": sorted(int(e.event_args["step_num"]) for e in by_step if e.event_args),
    }
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
