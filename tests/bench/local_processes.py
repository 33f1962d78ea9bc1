"""Local jobs: what the keeper costs a job's processes (start, end, stop), against starting them directly.

    python -m tests.bench.local_processes [--runs 20] [--write-md]

Every program of a local job (training, each rule evaluator) runs under a keeper on Linux
(sdk_ext/local/jobs/keeper.py: a child subreaper that ends the program's whole tree). Measured in one run,
alternating, with :class:`~sdk_ext.local.jobs.processes.Child` as the runner uses it, once with the keeper
and once starting the program directly (the code path kept for systems without ``prctl``):

* start: ``Child.start()`` returns (the program has been executed);
* run to exit: start to the exit code of ``python -c pass`` (the keeper reaps and ends the tree first);
* stop: a sleeping program, ``Child.stop()`` from SIGTERM to its exit code.

There is no smdebug counterpart: smdebug has no local runner.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sdk_ext.local.jobs import processes
from sdk_ext.local.jobs.processes import Child
from tests.bench._markdown import write_section


def _child(root: Path, code: str, keeper: bool) -> Child:
    child = Child("bench", [sys.executable, "-c", code], env=dict(os.environ), cwd=root, log_path=root / "log")
    child._keeper = keeper and processes.HAS_KEEPER  # the direct path, as without prctl
    return child


def _wait(child: Child) -> int:
    while (code := child.poll()) is None:
        time.sleep(0.001)
    return code


def one_round(root: Path, keeper: bool) -> dict[str, float]:
    child = _child(root, "pass", keeper)
    t0 = time.perf_counter()
    child.start()
    t1 = time.perf_counter()
    _wait(child)
    t2 = time.perf_counter()
    sleeper = _child(root, "import time; print('up', flush=True); time.sleep(60)", keeper)
    sleeper.start()
    time.sleep(0.2)  # the interpreter is up and sleeping
    t3 = time.perf_counter()
    sleeper.stop(10.0, poll_interval=0.001)
    t4 = time.perf_counter()
    return {"start": t1 - t0, "exit": t2 - t0, "stop": t4 - t3}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--write-md", action="store_true", help="update this section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    if not processes.HAS_KEEPER:
        print("no keeper on this system (Linux only): local_processes skipped", file=sys.stderr)
        return 0
    root = Path(tempfile.mkdtemp(prefix="sdk-ext-bench-procs-"))
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    try:
        for i in range(args.runs):
            for keeper in ((True, False) if i % 2 == 0 else (False, True)):
                results[keeper].append(one_round(root, keeper))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    rows = []
    for key, what in (("start", "start (Child.start returns)"), ("exit", "`python -c pass`: start to exit code"),
                      ("stop", "stop a sleeping program: SIGTERM to exit code")):
        kept = statistics.median(r[key] for r in results[True]) * 1000
        direct = statistics.median(r[key] for r in results[False]) * 1000
        ratio = "" if key == "start" else f"{kept / direct:.2f}"  # direct: Popen returns before the program runs
        rows.append(f"| {what} | {direct:.1f} | {kept:.1f} | {kept - direct:+.1f} | {ratio} |")
    body = (
        "## Local jobs: what the keeper costs a job's processes\n\n"
        f"`python -m tests.bench.local_processes --runs {args.runs} --write-md` ({platform.machine()}, "
        f"{os.cpu_count()} cores shared with other jobs, load average {load:.1f} at the end; Python "
        f"{platform.python_version()}). Milliseconds, median over {args.runs} alternating rounds; the same "
        "`Child` with its keeper (a second small Python process, the standard library only) and starting the "
        "program directly.\n\n"
        "| per program | direct, ms | keeper, ms | added, ms | ratio |\n|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n\n"
        "A job starts one program per rule plus the training: the keeper adds its start-up once to each, "
        "while they start in parallel; the stop path (SIGTERM through the keeper) is what "
        "`local_stop` measures end to end.\n"
    )
    print(body)
    if args.write_md:
        write_section("local_processes", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
