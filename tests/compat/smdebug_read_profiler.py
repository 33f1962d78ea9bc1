"""Run by real smdebug 1.0.34's interpreter (tests/compat/test_profiler_smdebug_reads.py): read a
profiler-output directory with smdebug's readers and print every event as JSON.

    python smdebug_read_profiler.py PATH START_US END_US
"""

import json
import sys

from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader


def main() -> None:
    path, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    system = LocalSystemMetricsReader(path)
    framework = LocalAlgorithmMetricsReader(path)
    out = {
        "system_first": system.get_timestamp_of_first_available_file(),
        "system_latest": system.get_timestamp_of_latest_available_file(),
        "framework_latest": framework.get_timestamp_of_latest_available_file(),
        "system": [
            [e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp]
            for e in system.get_events(start, end)
        ],
        "gpu": len(system.get_events(start, end, event_type="gpu")),
        "framework": [
            [
                e.event_name,
                e.event_phase,
                e.start_time,
                e.duration,
                e.end_time,
                e.node_id,
                e.event_args,
                e.pid,
            ]
            for e in framework.get_events(start, end)
        ],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
