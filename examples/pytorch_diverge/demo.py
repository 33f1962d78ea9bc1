"""`make demo`: train.py as a local SageMaker job with Debugger rules; a rule catches the divergence, the
auto-stop handler stops the job, and the HTML report is written. Prints which rule stopped the job at
which step, and where the report is. Exit code 1 if the job was not stopped by a rule.

    python examples/pytorch_diverge/demo.py [--jobs-dir demo-output]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sdk_ext.cli import main as sdk_ext

HERE = Path(__file__).resolve().parent


def demo_args(jobs_dir: Path) -> list[str]:
    """The `sdk-ext run` command line of the demo."""
    return ["run", str(HERE / "train.py"), "--jobs-dir", str(jobs_dir),
            "--rule", "ExplodingTensor", "--rule", "VanishingGradient", "--rule", "LossNotDecreasing",
            "--collection", "weights", "--collection", "gradients", "--collection", "losses",
            "--save-interval", "1", "--stop-grace", "5", "--report", "--expect-status", "Stopped"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs-dir", type=Path, default=Path("demo-output"))
    args = parser.parse_args()
    print("sdk-ext " + " ".join(demo_args(args.jobs_dir)), flush=True)
    sys.exit(sdk_ext(demo_args(args.jobs_dir)))
