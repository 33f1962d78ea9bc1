"""A fake training job for live rule tests and the detection benchmark (run as a separate process).

    python -m tests.functional.rules.live_writer OUT_DIR --steps 50 --interval 0.05 --bad-step 30

Saves ``gradient/fc1.weight`` every step with sdk_ext.hooks.Hook: healthy values (mean |g| 0.5),
except at ``--bad-step`` where the gradient vanishes (1e-9). Right after the bad step's files are
committed it writes the wall time to ``OUT_DIR.bad_time``. Ends with the end-of-training marker
unless ``--no-end``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from sdk_ext.hooks import Hook, SaveConfig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out_dir")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--bad-step", type=int, default=-1)
    p.add_argument("--size", type=int, default=1000, help="elements per gradient")
    p.add_argument("--no-end", action="store_true")
    args = p.parse_args(argv)
    hook = Hook(args.out_dir, save_config=SaveConfig(save_interval=1))
    healthy = np.full(args.size, 0.5, dtype=np.float32)
    for step in range(args.steps):
        value = np.full(args.size, 1e-9, dtype=np.float32) if step == args.bad_step else healthy
        with hook.step(step):
            hook.save_tensor("gradient/fc1.weight", value, collections_to_write="gradients")
            hook.save_scalar("loss", 1.0 / (step + 1))
        hook.flush()
        if step == args.bad_step:
            Path(args.out_dir.rstrip("/") + ".bad_time").write_text(repr(time.time()))
        time.sleep(args.interval)
    if args.no_end:
        hook.flush()
        while True:  # keep "training" until killed
            time.sleep(1)
    hook.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
