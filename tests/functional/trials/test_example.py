"""`make demo`'s example writes a trial and reads it back through create_trial."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_format_roundtrip_example_runs_end_to_end(tmp_path, repo_env):
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "format_roundtrip.py"), str(tmp_path / "trial")],
        capture_output=True, text=True, env=repo_env, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "workers ['worker_0', 'worker_1'], ended: True" in done.stdout
    assert "EVAL: [0, 1]" in done.stdout and "read 17 values" in done.stdout
