"""cdk.json carries the feature flags `cdk init` writes for the installed (pinned) aws-cdk-lib."""

from __future__ import annotations

import json
import tarfile
from importlib.metadata import version
from pathlib import Path

import aws_cdk
import pytest

from infra.app import cdk_json_context
from tests.conftest import REPO


def _recommended_flags() -> dict[str, object]:
    """aws-cdk-lib's recommended-feature-flags.json (what `cdk init` copies into cdk.json), from its jsii bundle."""
    (bundle,) = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        flags: dict[str, object] = json.load(member)
    return flags


def test_cdk_json_sets_every_recommended_flag_of_the_installed_aws_cdk_lib() -> None:
    recommended = _recommended_flags()
    context = cdk_json_context()
    assert len(recommended) > 50
    missing = sorted(set(recommended) - set(context))
    assert not missing, f"cdk.json lacks {len(missing)} feature flags of aws-cdk-lib {version('aws-cdk-lib')}"
    assert {k: context[k] for k in recommended} == recommended


def test_the_infra_extra_pins_the_aws_cdk_lib_whose_flags_cdk_json_holds() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    infra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["infra"]
    assert [r for r in infra if r.startswith("aws-cdk-lib")] == [f"aws-cdk-lib=={version('aws-cdk-lib')}"]
