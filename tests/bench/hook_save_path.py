"""Benchmark: the PyTorch hook's own cost per save-all step, before/after a change (sdk_ext only).

    git archive <before> | tar -x -C /tmp/before
    python -m tests.bench.hook_save_path --baseline /tmp/before [--rounds 20] [--dirs /tmp,/dev/shm] [--write-md]

hook_overhead measures a training step with and without the hook; on a shared machine its added
milliseconds move by 10-30% from run to run, more than a change of a few percent. This one times only
what the hook does in a save-all step (``_hook_save_path_worker.py``: the forward pre-hook that saves
weights and biases and the gradient saver of each parameter, called directly with fixed tensors, on
hook_overhead's MLP and CNN), as the calling thread's CPU time, in ``--rounds`` rounds alternating
between a long-lived process of each tree, so that each before/after pair of rounds meets the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.bench._markdown import where, write_section

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("_hook_save_path_worker.py")


class Worker:
    """A worker process over one source tree's sdk_ext, answering one timed round per request."""

    def __init__(self, code: Path, out: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(code))  # that tree's sdk_ext wins over the venv's
        self.code = code
        self.proc = subprocess.Popen([sys.executable, str(WORKER), "--out", str(out)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self._answer()  # ready

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr is not None else ""
            raise SystemExit(f"worker failed ({self.code}):\n{err[-4000:]}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def round(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.write("\n")
                self.proc.stdin.close()
            self.proc.wait(timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="source tree of an earlier commit")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per side, alternating")
    parser.add_argument("--dirs", default=tempfile.gettempdir() + ",/dev/shm")
    parser.add_argument("--write-md", action="store_true", help="update the hook_save_path section of BENCHMARKS.md")
    args, _ = parser.parse_known_args(argv)
    lines = ["| file system | model | before: CPU us per step, median (best) | after | after / before: median of "
             "paired rounds (quartiles) | wall us per step, before / after |", "|---|---|---|---|---|---|"]
    for base in [d for d in args.dirs.split(",") if d and os.path.isdir(d)]:
        root = Path(tempfile.mkdtemp(prefix="sdk-ext-hook-save-path-", dir=base))
        workers: dict[str, Worker] = {}
        try:
            workers["before"] = Worker(args.baseline.resolve(), root / "before")
            workers["after"] = Worker(REPO, root / "after")
            rounds: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
            for r in range(args.rounds):
                for side in ("before", "after") if r % 2 else ("after", "before"):
                    rounds[side].append(workers[side].round())
        finally:
            for worker in workers.values():
                worker.close()
            shutil.rmtree(root, ignore_errors=True)
        place = where(base)
        for kind in ("mlp", "cnn"):
            cpu = {side: [r[kind]["cpu"] * 1e6 for r in rounds[side]] for side in rounds}
            wall = {side: statistics.median(r[kind]["wall"] * 1e6 for r in rounds[side]) for side in rounds}
            ratios = sorted(a / b for a, b in zip(cpu["after"], cpu["before"]))
            q = statistics.quantiles(ratios, n=4)
            lines.append(
                f"| {place} | {kind.upper()} | {statistics.median(cpu['before']):.0f} "
                f"({min(cpu['before']):.0f}) | {statistics.median(cpu['after']):.0f} ({min(cpu['after']):.0f}) | "
                f"**{statistics.median(ratios):.2f}** ({q[0]:.2f} .. {q[2]:.2f}) | {wall['before']:.0f} / {wall['after']:.0f} |")
    load = os.getloadavg()[0]
    body = ("### The PyTorch hook's own work per save-all step, before/after (sdk_ext only, one run)\n\n"
            f"Command: `git archive <before> | tar -x -C /tmp/before; python -m tests.bench.hook_save_path --baseline "
            f"/tmp/before --rounds {args.rounds} --write-md` ({os.cpu_count()} cores, load average {load:.1f} at the "
            "end). One process per side and file system; rounds of 150 steps alternate between them, so each pair of "
            "rounds meets the same load; the ratio is the median over pairs.\n\n" + "\n".join(lines))
    print(body)
    if args.write_md:
        write_section("hook_save_path", body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
