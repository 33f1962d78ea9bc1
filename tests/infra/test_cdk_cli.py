"""`npx cdk synth` with the pinned CLI (package.json), as CI and users run it, with no network.

Offline proof, two ways: the run happens in a fresh network namespace with only loopback (`unshare -n`,
or `unshare -rn` without root) when the machine allows one, and a Node preload (nethook.cjs) records every
DNS lookup and TCP/UDP connection any Node process of the run attempts; the record must stay empty.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.sagemaker_events import captured_pattern

CDK = REPO / "node_modules" / ".bin" / "cdk"
NETHOOK = Path(__file__).with_name("nethook.cjs")
OFFLINE_ENV = {
    "CDK_DISABLE_CLI_TELEMETRY": "true",
    "CDK_DISABLE_VERSION_CHECK": "1",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _network_namespace() -> list[str]:
    """The command prefix that runs a command without network, or [] where namespaces are not allowed."""
    if shutil.which("unshare") is None:
        return []
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        if subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode == 0:
            return prefix
    return []


def _synth(tmp_path: Path, *context: str) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """`npx cdk synth` in the checkout, offline, with ``--context`` values: (process, cdk.out, network log)."""
    if not CDK.exists():
        message = "CDK CLI not installed: run `make cdk-cli` (npm ci with the committed package-lock.json)"
        if os.environ.get("SDK_EXT_REQUIRE_CDK_CLI") == "1":
            pytest.fail(message)
        pytest.skip(message)
    out, net_log = tmp_path / "cdk.out", tmp_path / "network.log"
    env = dict(os.environ) | OFFLINE_ENV
    env["NETHOOK_LOG"] = str(net_log)
    env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} --require {NETHOOK}".strip()
    # cdk.json runs `python3 -m infra.app`: this interpreter (the venv with aws-cdk-lib) comes first
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    namespace = _network_namespace()
    command = [*namespace, "npx", "--no", "cdk", "synth", "--no-notices", "--quiet", "--output", str(out)]
    for value in context:
        command += ["--context", value]
    proc = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    return proc, out, net_log


@pytest.mark.slow
def test_npx_cdk_synth_succeeds_without_network(tmp_path):
    proc, out, net_log = _synth(tmp_path, "opt_in_tag=sdk-ext:auto-stop")
    assert proc.returncode == 0, f"{' '.join(proc.args)} failed:\n{proc.stdout}\n{proc.stderr}"
    assert "feature flags are not configured" not in proc.stdout + proc.stderr  # cdk.json sets them all
    attempts = net_log.read_text() if net_log.exists() else ""
    assert attempts == "", f"the offline synth tried to reach the network:\n{attempts}"
    template = json.loads((out / "DebuggerAutoStop.template.json").read_text())
    (rule,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    assert rule["Properties"]["EventPattern"] == captured_pattern()
    report = json.loads((out / "validation-report.json").read_text())
    assert [p["conclusion"] for p in report["pluginReports"]] == ["success"]


@pytest.mark.slow
def test_npx_cdk_synth_without_a_scope_refuses_and_says_what_to_pass(tmp_path):
    proc, out, _ = _synth(tmp_path)
    assert proc.returncode != 0
    assert "infra.app: invalid context: no scope: pass --context job_prefix=PREFIX" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "DebuggerAutoStop.template.json").exists()


def test_network_hook_records_attempts(tmp_path):
    """The preload really sees a connection attempt (so an empty record above means none was made)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed")
    net_log = tmp_path / "network.log"
    script = "require('net').connect({host: '127.0.0.1', port: 9}).on('error', () => {});"
    env = dict(os.environ, NETHOOK_LOG=str(net_log), NODE_OPTIONS=f"--require {NETHOOK}")
    subprocess.run([node, "-e", script], env=env, check=True, timeout=60)
    assert json.loads(net_log.read_text())["target"] == "127.0.0.1:9"
