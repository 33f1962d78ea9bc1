"""One timed read of system metrics, in a fresh process (run by tests/bench/profiler_read.py).

    python _profiler_read_worker.py READER ROOT START_US END_US

READER: ``sdk_ext_series`` (``get_series``: arrays per series), ``sdk_ext_events`` (``get_events``: an
object per sample, smdebug's API) or ``smdebug_events`` (smdebug 1.0.34's ``get_events``, run by its
venv's interpreter). Prints one JSON line: samples, seconds, files opened (every ``open``, or ``os.open``, of a ``.json``
below ROOT, counted the same way for both libraries), peak RSS in MiB.
"""

import builtins
import json
import logging
import os
import resource
import sys
import time


def main() -> None:
    reader_name, root, start, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    logging.disable(logging.INFO)
    opened = []
    real_open, real_os_open = builtins.open, os.open

    def counting_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        name = str(file)
        if name.startswith(root) and name.endswith(".json"):
            opened.append(name)
        return real_open(file, *args, **kwargs)

    def counting_os_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        name = os.fsdecode(path)  # sdk_ext's local storage reads with os.open
        if name.startswith(root) and name.endswith(".json"):
            opened.append(name)
        return real_os_open(path, *args, **kwargs)

    if reader_name.startswith("smdebug"):
        from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
    else:
        from sdk_ext.profiler.system_metrics_reader import LocalSystemMetricsReader

    builtins.open = counting_open
    os.open = counting_os_open
    began = time.perf_counter()
    reader = LocalSystemMetricsReader(root)
    if reader_name == "sdk_ext_series":
        series = reader.get_series(start, end)
        samples = sum(len(s) for s in series.values())
    else:
        samples = len(reader.get_events(start, end))
    seconds = time.perf_counter() - began
    builtins.open = real_open
    os.open = real_os_open
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"samples": samples, "seconds": seconds, "files": len(set(opened)), "rss_mib": peak}))


if __name__ == "__main__":
    main()
