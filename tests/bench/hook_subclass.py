"""Benchmark: a hook subclass written for smdebug (a ``forward_hook`` override, as in SageMaker's
class-activation-map example), sdk_ext vs smdebug 1.0.34, in one run.

Run from the repo root (smdebug's venv needs torch for its PyTorch hook: ``make smdebug-venv-torch``):

    SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.hook_subclass [--blocks 15] [--write-md]

Each implementation runs in its own process (``_subclass_worker.py``, one torch thread): a small CNN with
BatchNorm under ``none`` (no hook), ``control`` (a second hookless model: the noise floor), ``quiet`` (the subclass's override runs after every module's forward;
the step saves nothing) and ``saved`` (every step saves each module's inputs and outputs and their
gradients), timed in alternating blocks. The overrides are called at every step for every module in both
(smdebug's contract), so ``quiet`` shows what that costs. The machine is shared: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.bench._markdown import write_section

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_subclass_worker.py")


def run_worker(python: str, impl: str, out: Path, blocks: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([python, str(WORKER), "--impl", impl, "--out", str(out), "--blocks", str(blocks)],
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{impl} worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def table(res: dict[str, dict[str, Any]]) -> str:
    lines = ["| config | sdk_ext ms/step | overhead | smdebug ms/step | overhead |", "|---|---|---|---|---|"]
    for config in ("none", "control", "quiet", "saved"):
        row = [config]
        for impl in ("sdk_ext", "smdebug"):
            r = res.get(impl)
            if r is None:
                row += ["-", "-"]
                continue
            row += [f"{r[config]['ms']:.3f}", "" if config == "none" else f"{(r[config]['ratio'] - 1) * 100:+.1f}%"]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    ours = res["sdk_ext"]
    noise = max(abs(r["control"]["ratio"] - 1) for r in res.values())
    for config, what in (("quiet", "a step that saves nothing"), ("saved", "a saved step")):
        # each side against its own no-hook steps in the same process and round: the two processes run one
        # after the other, so their absolute times may see different load; the overheads compare
        added = {impl: r[config]["ratio"] - 1 for impl, r in res.items()}
        text = f"- {what}: the subclass adds {added['sdk_ext'] * 100:+.1f}% to the step under sdk_ext"
        if "smdebug" in added:
            text += f", {added['smdebug'] * 100:+.1f}% under smdebug"
        if all(abs(a) <= noise for a in added.values()):
            text += f": both within this run's noise floor (a second hookless model: up to {noise * 100:.1f}%)"
        elif "smdebug" in added and added["sdk_ext"] > 0:
            text += f" ({added['smdebug'] / added['sdk_ext']:.1f}x sdk_ext's)"
        lines.append(text + ".")
    lines.append(f"- Bytes saved per saved step: sdk_ext {ours['saved_bytes_per_step'] / 1e3:.0f} kB"
                 + (f", smdebug {res['smdebug']['saved_bytes_per_step'] / 1e3:.0f} kB" if "smdebug" in res else "")
                 + " (the same tensors; sdk_ext also writes its consolidated index at close).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=15, help="timed blocks of 20 steps per config")
    parser.add_argument("--write-md", action="store_true", help="update this benchmark's section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    smdebug = os.environ.get("SMDEBUG_PYTHON")
    if not smdebug:
        print("SMDEBUG_PYTHON not set: smdebug side skipped", file=sys.stderr)
    root = Path(tempfile.mkdtemp(prefix="sdk-ext-subclass-bench-"))
    try:
        results = {"sdk_ext": run_worker(sys.executable, "sdk_ext", root / "sdk_ext", args.blocks)}
        if smdebug:
            results["smdebug"] = run_worker(smdebug, "smdebug", root / "smdebug", args.blocks)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    body = (
        "## Hooks: a subclass written for smdebug (forward_hook override)\n\n"
        f"Command: `SMDEBUG_PYTHON=.venv-smdebug/bin/python python -m tests.bench.hook_subclass --blocks {args.blocks} "
        "--write-md`  \n"
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, shared (load average {load:.1f} at the end of the run: "
        "absolute times drift, ratios within a run hold); one torch thread; trials in the temp directory; "
        f"{args.blocks} rounds of 20-step blocks, configs alternating; ms/step = median block, overhead = median "
        "over rounds of the ratio to no hook in the same round.\n\n" + table(results)
    )
    print(body)
    if args.write_md:
        write_section("hook_subclass", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
