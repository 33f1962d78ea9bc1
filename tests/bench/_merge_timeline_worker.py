"""One timed merge of a job's timelines, in a fresh process (run by tests/bench/merge_timeline.py).

    python _merge_timeline_worker.py MERGER ROOT OUT START_US END_US LIMIT

MERGER: ``sdk_ext`` or ``smdebug`` (smdebug 1.0.34's MergedTimeline, run by its venv's interpreter; its
progress prints go to /dev/null). LIMIT: sdk_ext's ``max_events_in_memory`` (0: its default). Prints one
JSON line: seconds, peak RSS in MiB, the merged file's size, its events (metadata left out) and complete
("X") events.
"""

import contextlib
import json
import logging
import os
import resource
import sys
import time


def main() -> None:
    merger, root, out, start, end, limit = sys.argv[1:7]
    logging.disable(logging.INFO)
    if merger == "smdebug":
        from smdebug.profiler.analysis.utils.merge_timelines import MergedTimeline

        timeline = MergedTimeline(root, output_directory=out)
    else:
        from sdk_ext.profiler.analysis.utils.merge_timelines import MergedTimeline

        options = {"max_events_in_memory": int(limit)} if int(limit) else {}
        timeline = MergedTimeline(root, output_directory=out, **options)
    began = time.perf_counter()
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        path = timeline.merge_timeline(int(start), int(end))
    seconds = time.perf_counter() - began
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size = os.path.getsize(path) / 2**20
    with open(path) as f:
        events = [e for e in json.load(f) if e.get("ph") != "M"]
    complete = sum(e["ph"] == "X" for e in events)
    print(json.dumps({"seconds": seconds, "rss_mib": peak, "mib": size, "events": len(events), "complete": complete}))


if __name__ == "__main__":
    main()
