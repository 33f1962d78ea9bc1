"""Which scripts get the zero-change hook by default, and what a request's Environment says."""

from __future__ import annotations

from pathlib import Path

import pytest

from sdk_ext.local.jobs import frameworks


@pytest.mark.parametrize(("source", "framework"), [
    ("import torch\n", "pytorch"),
    ("from torch import nn\n", "pytorch"),
    ("def main():\n    import torch.nn as nn\n", "pytorch"),
    ("import lightning as L\n", "pytorch"),
    ("import numpy as np\n", None),
    ("from .torch import x\n", None),  # a relative import of the script's own package
    ("print((1, 2)\n", None),  # a syntax error: no guess; the job reports the error itself
])
def test_framework_is_detected_from_the_scripts_imports(tmp_path: Path, source: str, framework: str | None) -> None:
    script = tmp_path / "train.py"
    script.write_text(source)
    assert frameworks.detect(script) == framework


def test_launcher_follows_the_choice_then_the_imports(tmp_path: Path) -> None:
    torch_script, plain = tmp_path / "t.py", tmp_path / "p.py"
    torch_script.write_text("import torch\n")
    plain.write_text("print('hi')\n")
    assert frameworks.launcher(torch_script, None) == "sdk_ext.pytorch.run"
    assert frameworks.launcher(torch_script, False) is None
    assert frameworks.launcher(plain, None) is None
    assert frameworks.launcher(plain, True) == "sdk_ext.pytorch.run"


def test_request_environment_says_yes_no_or_nothing() -> None:
    assert frameworks.requested({"SDK_EXT_ZERO_CHANGE": "1"}) is True
    assert frameworks.requested({"SDK_EXT_ZERO_CHANGE": "false"}) is False
    assert frameworks.requested({"OTHER": "1"}) is None and frameworks.requested(None) is None
