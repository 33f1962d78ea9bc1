"""Benchmark: the PyTorch hook's cost per training step on a sharded model (FSDP2) against DDP.

Run from the repo root (gloo on CPU, one thread per rank):

    python -m tests.bench.sharded_overhead [--ranks 2 8] [--layers 6] [--width 512] [--steps 5] [--blocks 15]
        [--dir DIR] [--write-md]

For each world size, one job (``_sharded_worker.py``, every rank a process, as torchrun starts them)
trains the same MLP under DDP and under FSDP2 (``fully_shard`` per layer), each with no hook, the
default hook configuration and save-all every step (include_workers "one"); FSDP2's save-all twice:
with the default transport (the ranks of a host share memory) and with every piece sent through gloo
(``SDK_EXT_GATHER_TRANSPORT=gloo``, as between hosts). Every block runs every configuration of both
wrappers in a rotating order, so that a slow phase of the machine (writes into the page cache here
run 3-5 ms per 12 MiB most of the time and 30 ms for seconds at a time) falls on all of them alike.
Save-all's cost is measured two ways, per block: the CPU time inside the hook (its callbacks, timed
with ``thread_time``, and the threads it started: its gloo group's, its writer's), and what it adds to
the whole job's CPU time (save-all minus no hook, all ranks); the first is what the hook does, the
second also holds its side effects and the machine's noise (the no-hook step of FSDP2 alone varies by
several milliseconds), so its lower quartile and median over blocks are both shown. For the default configuration the time spent
inside the hook per step is measured directly (a step that saves nothing runs only its step-start
callback). Goals: save-all on FSDP2 costs at most 1.5x what it costs on DDP (the added time per
step), and the default configuration adds under 1%. smdebug 1.0.34 is not in the table: it cannot
save a sharded model at all (a DTensor parameter fails the first step; an FSDP1 model saves only the
flat parameter's gradient).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

from tests.bench._markdown import where, write_section
from tests.functional.pytorch.launch import run_ranks

WORKER = Path(__file__).with_name("_sharded_worker.py")


def measure(ranks: int, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sdk-ext-bench-sharded-", dir=args.dir) as out:
        outputs = run_ranks(WORKER, [out, str(args.layers), str(args.width), str(args.steps), str(args.blocks)],
                            world=ranks, timeout=3000)
    raw: dict[str, dict[str, list[float]]] = json.loads(outputs[0].strip().splitlines()[-1])
    return raw


def quartile(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 4]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


ROWS = (("ddp", "save_all", "DDP"), ("fsdp2", "save_all", "FSDP2, shared memory"),
        ("fsdp2", "save_all_gloo", "FSDP2, gloo"))


def table(results: dict[int, dict[str, dict[str, list[float]]]], args: argparse.Namespace, where: str,
          load: str) -> str:
    params = args.layers * (args.width * args.width + args.width)
    lines = [
        f"MLP of {args.layers} x Linear({args.width}, {args.width}) ({params / 1e6:.2f} M parameters, "
        f"{params * 4 / 2**20:.1f} MiB of weights), batch 32, SGD; gloo on CPU, one thread per rank; trials in "
        f"{where}; {args.blocks} blocks, each running every configuration for {args.steps} steps in a rotating "
        f"order; medians over blocks. {load}",
        "",
        "| ranks | wrapper | no hook: ms/step, CPU ms/step (all ranks) | save-all: CPU in the hook, ms/step (all "
        "ranks) | / DDP | save-all adds to the job's CPU, ms/step: lower quartile / median | / DDP | "
        "wall added, ms/step | default config: in the hook |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for ranks, res in sorted(results.items()):
        adds: dict[str, tuple[float, float]] = {}
        inside: dict[str, float] = {}
        for how, config, label in ROWS:
            r = res[how]
            cpu_adds = [a - b for a, b in zip(r[f"cpu_{config}"], r["cpu_none"])]
            wall_adds = [a - b for a, b in zip(r[config], r["none"])]
            adds[label] = (quartile(cpu_adds), median(cpu_adds))
            inside[label] = median(r[f"hook_{config}"])
            base, base_inside = adds["DDP"], inside["DDP"]
            ratio = (f"{adds[label][0] / base[0]:.2f}x / {adds[label][1] / base[1]:.2f}x"
                     if label != "DDP" and min(base) > 0 else "")
            ratio_inside = f"{inside[label] / base_inside:.2f}x" if label != "DDP" else ""
            default = r["hook_in_default"][0] / median(r["none"]) * 100
            lines.append(f"| {ranks} | {label} | {median(r['none']) * 1e3:.2f}, {median(r['cpu_none']) * 1e3:.2f} | "
                         f"{inside[label] * 1e3:.2f} | {ratio_inside} | "
                         f"{adds[label][0] * 1e3:+.2f} / {adds[label][1] * 1e3:+.2f} | {ratio} | "
                         f"{median(wall_adds) * 1e3:+.2f} | "
                         f"{r['hook_in_default'][0] * 1e6:.1f} us ({default:.3f}% of a step) |")
        shared, ddp = adds["FSDP2, shared memory"], adds["DDP"]
        worst = max(res[h]["hook_in_default"][0] / median(res[h]["none"]) * 100 for h in ("ddp", "fsdp2"))
        verdicts.append(f"- {ranks} ranks: save-all costs **{inside['FSDP2, shared memory'] / inside['DDP']:.2f}x** as "
                        f"much CPU inside the hook per step on FSDP2 as on DDP (all ranks; goal <= 1.5x); it adds "
                        f"{shared[0] / ddp[0]:.2f}x (lower quartiles) / {shared[1] / ddp[1]:.2f}x (medians) as much "
                        f"to the whole job's CPU. Default configuration: the hook runs {worst:.3f}% of a step at "
                        f"most (goal < 1%).")
    return "\n".join(lines + [""] + verdicts)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.sharded_overhead", description=__doc__)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--dir", default=None, help="where the trials go (default: the system's temporary directory)")
    parser.add_argument("--write-md", action="store_true")
    args, _ = parser.parse_known_args(argv)
    before = os.getloadavg()
    results = {ranks: measure(ranks, args) for ranks in args.ranks}
    after = os.getloadavg()
    load = (f"Machine: {os.cpu_count()} cores ({platform.processor() or platform.machine()}), load average "
            f"{before[0]:.1f} before and {after[0]:.1f} after the run (shared with other work).")
    text = table(results, args, where(args.dir or tempfile.gettempdir()), load)
    print(text)
    if args.write_md:
        command = "python -m tests.bench.sharded_overhead " + " ".join(
            f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in
            (("ranks", args.ranks), ("layers", args.layers), ("width", args.width), ("steps", args.steps),
             ("blocks", args.blocks))) + (f" --dir {args.dir}" if args.dir else "") + " --write-md"
        write_section("sharded_overhead", "## PyTorch hook on a sharded model: FSDP2 against DDP\n\n"
                      f"`{command}`\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
