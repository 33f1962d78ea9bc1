"""What the README tells a new user to do works as written: the custom-rule example, the rule count."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.exceptions import ConfigError
from sdk_ext.hooks import Hook, SaveConfig
from sdk_ext.local.request.from_options import builtin_rule
from sdk_ext.rules.builtin import SDK_EXT_RULES
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _custom_rule_example() -> str:
    start = README.index("A custom rule written for SageMaker")
    return re.search(r"```python\n(.*?)```", README[start:], flags=re.DOTALL).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize(("gradient", "expected"), [(0.5, "no issues found"), (50.0, "resulted in the condition")])
def test_readme_custom_rule_example_ends_cleanly_whether_or_not_it_fires(
        tmp_path: Path, repo_env: dict[str, str], gradient: float, expected: str) -> None:
    trial = tmp_path / "run1"
    hook = Hook(trial, save_config=SaveConfig(save_interval=1), include_collections=["gradients"])
    for _ in range(3):
        with hook.step():
            hook.save_tensor("gradient/fc.weight", np.full(4, gradient), "gradients")
    hook.close()
    code = _custom_rule_example().replace('"/tmp/run1"', repr(str(trial)))
    result = subprocess.run([sys.executable, "-c", code], env=repo_env, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert expected in result.stdout


def test_readme_rule_count_is_what_dash_dash_rule_accepts() -> None:
    with pytest.raises(ConfigError) as err:
        builtin_rule("NoSuchRule")
    listed = re.search(r"choose one of (.*?) \(or --custom-rule", str(err.value)).group(1).split(", ")  # type: ignore[union-attr]
    claimed = int(re.search(r"All (\d+) built-in tensor rules", README).group(1))  # type: ignore[union-attr]
    own = [n for n in listed if n in SDK_EXT_RULES]  # sdk_ext's own rules, beside SageMaker's 20
    assert own == ["ReplicaDivergence"]
    assert len(listed) - len(own) == claimed == 20
    section = README[README.index("All 20 built-in tensor rules"):README.index("A custom rule written for SageMaker")]
    assert all(name in section for name in listed)
