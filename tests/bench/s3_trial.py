"""Benchmark: open and read a trial on S3 (moto's server), sdk_ext vs smdebug 1.0.34.

Run from the repo root:  python -m tests.bench.s3_trial [--steps 2000 --tensors 10 --workers 1 --sample 20 --budget 120]
(SMDEBUG_PYTHON points at the smdebug venv's interpreter; `make bench` sets it.)
``--latency-ms N`` adds N ms to every request (the proxy sleeps before answering), as S3's round trip
would; ``--workloads open,last`` runs only those; ``--sdk-ext-path DIR`` makes the sdk_ext reader import
sdk_ext from another checkout (``git archive`` of a revision to compare; the trial is written by this one).

Both readers run in their own subprocess against the same moto server, reached through a counting
proxy (tests/moto_s3.py), so requests are counted on the server side, retries included. The trial is
written by sdk_ext's trial writer (what the hook writes: smdebug's files plus, at close, one
consolidated index per worker) into a local directory and put into moto's backend twice: as written
(``hook``) and without the consolidated indexes (``plain``: the objects smdebug's own writer leaves).
Workloads, each in a fresh process, the same calls for both readers:
  open:        create_trial(s3://.../hook), steps(), tensor_names()
  open_plain:  the same on the plain trial (every index file must be read for tensor_names)
  last_plain:  create_trial, steps(), then the value of one tensor at the last step, on the plain
               trial (random access, smdebug issue #99); ``last`` does the same on the hook's trial
  sample:      open, then value() of every tensor at ``--sample`` evenly spaced steps (every worker)
  values:      open, then values() of every tensor (sdk_ext only: smdebug's values() is its value() loop)
  all:         open, then value() of every tensor at every step, tensor by tensor.
A reader still busy after ``--budget`` seconds in ``sample`` or ``all`` stops there; its total is projected
from what it measured (open + the measured cost per value times the number of values), and the table
says so. smdebug needs this: each of its value() calls lists the whole events/ prefix (docs/FORMAT.md#differences-from-smdebug).
Every workload reports a checksum of the values it read; the two readers' checksums must agree.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.format import CollectionsFile, CollectionSpec
from sdk_ext.format.consolidated import CONSOLIDATED_DIR
from sdk_ext.hooks import TrialWriter
from sdk_ext.modes import ModeKeys
from sdk_ext.storage import LocalStorage
from tests.moto_s3 import FaultProxy, s3_environment

REPO = Path(__file__).resolve().parents[2]
PREFIX = "trial"
WORKLOADS = ("open", "open_plain", "last", "last_plain", "sample", "all")

CHILD = r"""
import json, sys, time
import os
impl, uri, workload, sample, budget = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
cache = {"cache_dir": sys.argv[6]} if len(sys.argv) > 6 else {}
if impl == "smdebug":
    from smdebug.trials import create_trial
else:
    from sdk_ext.trials import create_trial, TrialOptions
    if os.environ.get("BENCH_FILE_CACHE_BYTES"):  # a trial larger than the reader's file cache
        cache["options"] = TrialOptions.from_env(os.environ, file_cache_bytes=int(os.environ["BENCH_FILE_CACHE_BYTES"]))
t0 = time.perf_counter()
trial = create_trial(uri, **cache)
steps = trial.steps()
checksum, n, complete = 0.0, 0, True
if workload.startswith("last"):  # random access: one tensor at the last step, its name known beforehand
    names = ["layer0/weight"]
    checksum += float(trial.tensor(names[0]).value(steps[-1]).sum())
    n = 1
    t_open = time.perf_counter() - t0
else:
    names = trial.tensor_names()
    t_open = time.perf_counter() - t0
    workers = trial.workers()
    picked = steps[:: max(1, len(steps) // sample)][:sample] if workload == "sample" else steps
if workload == "values":
    for name in names:
        for v in trial.tensor(name).values().values():
            checksum += float(v.sum())
            n += 1
elif workload in ("sample", "all"):
    for name in names:
        tensor = trial.tensor(name)
        for step in picked:
            for worker in (workers if len(workers) > 1 else [None]):
                checksum += float(tensor.value(step, worker=worker).sum())
                n += 1
            if time.perf_counter() - t0 > budget:
                complete = False
                break
        if not complete:
            break
total = time.perf_counter() - t0
print(json.dumps({"open_s": t_open, "total_s": total, "steps": len(steps), "tensors": len(names), "values": n,
                  "wanted": len(names) * len(picked) * max(1, len(trial.workers())) if workload in ("sample", "all") else n,
                  "complete": complete, "checksum": checksum}))
"""


def write_trial(root: Path, steps: int, tensors: int, elements: int, workers: int) -> dict[str, bytes]:
    """A finished trial as sdk_ext's hook leaves it (its writer): ``tensors`` float32 tensors saved at each of
    ``steps`` TRAIN steps by each of ``workers`` workers. Returns ``{key: bytes}`` of every file."""
    rng = np.random.default_rng(0)
    names = [f"layer{i}/weight" for i in range(tensors)]
    storage = LocalStorage(root)
    spec = CollectionSpec("weights", include_regex=(".*weight",))
    for rank in range(workers):
        writer = TrialWriter(storage, worker=f"worker_{rank}", clock=lambda: 1.7e9)
        for step in range(steps):
            writer.open_step(step, ModeKeys.TRAIN, step)
            for name in names:
                writer.write_tensor(name, rng.standard_normal(elements).astype(np.float32))
            writer.close_step()
        writer.write_collections(CollectionsFile({"weights": spec}, num_workers=workers))
        writer.write_end_marker()
        writer.close()
    return {key: storage.read(key) for key in storage.list("")}


def run_child(python: str, impl: str, uri: str, workload: str, args: argparse.Namespace, env: dict[str, str],
              proxy: FaultProxy, cache_dir: str | None = None) -> dict[str, Any]:
    proxy.clear()
    started = time.perf_counter()
    done = subprocess.run([python, "-c", CHILD, impl, uri, workload, str(args.sample), str(args.budget),
                           *([cache_dir] if cache_dir else [])], env=env, capture_output=True,
                          text=True, timeout=3600, check=False, cwd=args.sdk_ext_path)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{impl} {workload} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(
        wall_s=wall,
        requests=proxy.count(),
        lists=proxy.count("GET", query_has="list-type=2"),
        gets=proxy.count("GET") - proxy.count("GET", query_has="list-type=2"),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--tensors", type=int, default=10)
    parser.add_argument("--elements", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--budget", type=float, default=120.0, help="seconds before 'all' stops and projects")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    parser.add_argument("--only", choices=("sdk_ext", "smdebug"), help="run one reader (no ratios)")
    parser.add_argument("--file-cache-mb", type=float, help="sdk_ext's file cache (to make the trial larger than it)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added to every request, as S3's round trip")
    parser.add_argument("--workloads", default=",".join(WORKLOADS + ("values",)),
                        help="comma-separated workloads to run (default: all; the table needs all)")
    parser.add_argument("--sdk-ext-path", type=Path, default=REPO,
                        help="import the sdk_ext reader from this checkout (default: this one)")
    args = parser.parse_args(argv)
    wanted = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(wanted) - set(WORKLOADS + ("values",))
    if unknown:
        parser.error(f"unknown workload(s): {', '.join(sorted(unknown))}")
    args.sdk_ext_path = args.sdk_ext_path.resolve()
    smdebug = os.environ.get("SMDEBUG_PYTHON") or str(REPO / ".venv-smdebug" / "bin" / "python")

    import boto3
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    proxy = FaultProxy(f"http://{host}:{port}", latency=args.latency_ms / 1000).start()
    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.create_bucket(Bucket=bucket)
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    with tempfile.TemporaryDirectory(prefix="bench-trial-") as written:
        objects = write_trial(Path(written), args.steps, args.tensors, args.elements, args.workers)
    for key, data in objects.items():
        backend.put_object(bucket, f"{PREFIX}/hook/{key}", data)
        if not key.startswith(CONSOLIDATED_DIR + "/"):
            backend.put_object(bucket, f"{PREFIX}/plain/{key}", data)

    env = dict(os.environ)
    env.update(s3_environment(proxy.url, Path(tempfile.mkdtemp(prefix="bench-aws-"))))
    env["PYTHONPATH"] = str(args.sdk_ext_path)
    env["SMDEBUG_LOG_LEVEL"] = "error"
    if args.file_cache_mb:
        env["BENCH_FILE_CACHE_BYTES"] = str(int(args.file_cache_mb * 2**20))
    uri = f"s3://{bucket}/{PREFIX}/hook"
    results: dict[str, dict[str, dict[str, Any]]] = {}
    plan = [("sdk_ext", sys.executable), ("smdebug", smdebug)]
    for impl, python in plan:
        if args.only and impl != args.only:
            continue
        for workload in WORKLOADS + (("values",) if impl == "sdk_ext" else ()):
            if workload not in wanted:
                continue
            print(f"running {impl} {workload} ...", file=sys.stderr, flush=True)
            where = uri.replace("/hook", "/plain") if workload.endswith("_plain") else uri
            results.setdefault(impl, {})[workload] = run_child(python, impl, where, workload, args, env, proxy)
        if impl in results:
            project(results[impl])
    if "sdk_ext" in results and "all" in wanted:  # a second analysis with a local cache: the first run fills it
        cache_dir = tempfile.mkdtemp(prefix="bench-cache-")
        print("running sdk_ext all twice with cache_dir ...", file=sys.stderr, flush=True)
        run_child(sys.executable, "sdk_ext", uri, "all", args, env, proxy, cache_dir)
        results["sdk_ext"]["all_cached"] = run_child(sys.executable, "sdk_ext", uri, "all", args, env, proxy, cache_dir)
    proxy.stop()
    server.stop()

    full = all(w in runs for runs in results.values() for w in WORKLOADS)
    print(report(results, args) if len(results) == 2 and full else json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def project(runs: dict[str, dict[str, Any]]) -> None:
    """Fill ``requests_total``/``time_total`` of each run: measured, or projected for an unfinished 'all'."""
    for run in runs.values():
        run.setdefault("complete", True)
        run["requests_total"], run["time_total"], run["projected"] = run["requests"], run["total_s"], False
    opened = runs.get("open")
    for run in (runs.get("sample"), runs.get("all")):
        if run is not None and opened is not None and not run["complete"] and run["values"]:
            per_request = (run["requests"] - opened["requests"]) / run["values"]
            per_second = (run["total_s"] - run["open_s"]) / run["values"]
            run["requests_total"] = opened["requests"] + per_request * run["wanted"]
            run["time_total"] = run["open_s"] + per_second * run["wanted"]
            run["projected"] = True


def _cell(run: dict[str, Any], key: str, unit: str = "") -> str:
    text = f"{run[key]:.1f}{unit}" if unit else f"{round(run[key])}"
    return text + (f" (projected from {run['values']} values)" if run["projected"] else "")


def report(results: dict[str, dict[str, dict[str, Any]]], args: argparse.Namespace) -> str:
    ours, theirs = results["sdk_ext"], results["smdebug"]
    files = args.steps * args.workers
    lines = [
        (f"S3 trial on moto, {args.steps} steps x {args.tensors} float32[{args.elements}] tensors x "
         f"{args.workers} worker(s): {files} event files + {files} index files "
         f"(`python -m tests.bench.s3_trial --steps {args.steps} --tensors {args.tensors} "
         f"--elements {args.elements} --workers {args.workers} --sample {args.sample} --budget {args.budget:g}"
         f"{f' --file-cache-mb {args.file_cache_mb:g}' if args.file_cache_mb else ''}"
         f"{f' --latency-ms {args.latency_ms:g}' if args.latency_ms else ''}`)"),
        "",
        "| workload | sdk_ext requests | smdebug requests | fewer requests | sdk_ext time | smdebug time | faster "
        "| same values |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for workload in WORKLOADS:
        o, t = ours[workload], theirs[workload]
        label = {
            "open": "open a trial sdk_ext's hook wrote: create_trial, steps(), tensor_names()",
            "open_plain": "open the same trial as smdebug's writer leaves it (no consolidated index)",
            "last": "the value of one tensor at the last step (random access), hook's trial",
            "last_plain": "the value of one tensor at the last step, smdebug's files",
            "sample": f"open + {o['wanted']} values (every tensor at {args.sample} steps)",
            "all": f"open + all {o['wanted']} values",
        }[workload]
        same = "n/a" if t["projected"] or o["projected"] else (
            "yes" if np.isclose(o["checksum"], t["checksum"], rtol=1e-9, atol=1e-6) else "**NO**")
        lines.append(
            f"| {label} | {_cell(o, 'requests_total')} | {_cell(t, 'requests_total')} "
            f"| {t['requests_total'] / max(o['requests_total'], 1):.1f}x | {_cell(o, 'time_total', ' s')} "
            f"| {_cell(t, 'time_total', ' s')} | {t['time_total'] / o['time_total']:.1f}x | {same} |"
        )
    bulk = ours["values"]
    lines.append(
        f"| open + all {bulk['values']} values with values() per tensor | {bulk['requests']} | | | "
        f"{bulk['total_s']:.1f} s | | | |"
    )
    cached = ours["all_cached"]
    lines.append(
        f"| the same, second analysis with `cache_dir` | {cached['requests']} | | | {cached['total_s']:.1f} s | | | |"
    )
    lines.append("")
    lines.append("Requests by kind (LIST / GET), measured: " + "; ".join(
        f"{impl} {w} {int(r['lists'])}/{int(r['gets'])}" for impl, runs in results.items() for w, r in runs.items()))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
