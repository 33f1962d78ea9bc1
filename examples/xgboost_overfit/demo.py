"""An XGBoost job that overfits on purpose (train.py, no debugger code in it), run as a local SageMaker job
through the zero-change path: the Overfit rule catches the validation loss pulling away from the training
loss, the auto-stop handler stops the job, and the HTML report shows the train/validation curves and the
feature importance. Exit code 1 if the job was not stopped by a rule.

    python examples/xgboost_overfit/demo.py [--jobs-dir demo-output]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sdk_ext.cli import main as sdk_ext

HERE = Path(__file__).resolve().parent


def demo_args(jobs_dir: Path, *extra: str) -> list[str]:
    """The `sdk-ext run` command line of the demo (``extra``: more sdk-ext options)."""
    return ["run", str(HERE / "train.py"), "--zero-change", "--jobs-dir", str(jobs_dir),
            # Overfit: validation loss more than 100% above training loss for 3 rounds in a row
            "--rule", "Overfit", "--rule-param", "Overfit:ratio_threshold=1.0", "--rule-param", "Overfit:patience=3",
            "--rule", "Overtraining",
            "--collection", "metrics", "--collection", "feature_importance",
            "--save-interval", "1", "--stop-grace", "5", "--report", "--expect-status", "Stopped", *extra]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs-dir", type=Path, default=Path("demo-output"))
    args = parser.parse_args()
    print("sdk-ext " + " ".join(demo_args(args.jobs_dir)), flush=True)
    sys.exit(sdk_ext(demo_args(args.jobs_dir)))
