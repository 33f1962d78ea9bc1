"""Two emulated hosts x four processes train a small transformer under FSDP2 (gloo on CPU); at step 12
rank 5's batches turn to NaN. ExplodingTensor reads every worker's tensors live, finds the NaN, and the
auto-stop handler stops the job: every rank on both hosts ends. The summary and the HTML report name the
worker and the step. Exit code 1 if the job was not stopped by the rule.

    python examples/fsdp_nan/demo.py [--jobs-dir demo-output] [--steps 300]

The training script is examples/fsdp_train/train.py (``--wrap fsdp2``), run as SageMaker runs a
``distribution={"torch_distributed": {"enabled": True}}`` job with ``instance_count=2``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sdk_ext.cli import main as sdk_ext

HERE = Path(__file__).resolve().parent
TRAIN = HERE.parent / "fsdp_train" / "train.py"
NAN_RANK, NAN_STEP = 5, 12


def demo_args(jobs_dir: Path, *, steps: int = 300, hosts: int = 2, processes: int = 4,
              nan_rank: int = NAN_RANK, nan_step: int = NAN_STEP, extra: list[str] | None = None) -> list[str]:
    """The `sdk-ext run` command line of the demo."""
    return ["run", str(TRAIN), "--jobs-dir", str(jobs_dir), "--no-zero-change",
            "--instance-count", str(hosts), "--processes-per-host", str(processes),
            "--rule", "ExplodingTensor", "--collection", "losses", "--collection", "gradients",
            "--collection", "weights", "--hook-param", "include_workers=all", "--save-interval", "1",
            "--stop-grace", "5", "--report", "--expect-status", "Stopped", *(extra or []),
            "--", "--wrap", "fsdp2", "--steps", str(steps), "--nan-rank", str(nan_rank), "--nan-step", str(nan_step)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs-dir", type=Path, default=Path("demo-output"))
    parser.add_argument("--steps", type=int, default=300, help="steps the job would train if nothing stopped it")
    args = parser.parse_args()
    argv = demo_args(args.jobs_dir, steps=args.steps)
    print("sdk-ext " + " ".join(argv), flush=True)
    sys.exit(sdk_ext(argv))
