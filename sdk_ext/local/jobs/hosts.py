"""Emulated hosts: ``ResourceConfig.InstanceCount = N`` runs N hosts ``algo-1`` ... ``algo-N`` on this machine.

Each host gets what SageMaker gives every instance of a job: ``resourceconfig.json`` (``current_host``,
``hosts``, ``network_interface_name``, ``current_instance_type``) and the environment ``SM_HOSTS``,
``SM_CURRENT_HOST``, ``SM_HOST_COUNT``, ``SM_CURRENT_HOST_RANK``, ``SM_MASTER_ADDR``, ``SM_MASTER_PORT``,
``SM_NUM_GPUS``, ``SM_NUM_CPUS`` (and ``MASTER_ADDR``/``MASTER_PORT``, which SageMaker's PyTorch container
sets). How the hosts share the machine:

* **One job directory.** ``algo-1`` sees the job directory itself as its /opt/ml (so a one-host job is
  laid out as before); ``algo-2`` ... get ``hosts/algo-K/input/config`` holding their own
  ``resourceconfig.json`` beside links to the job's other config files, and ``hosts/algo-K/input/data``,
  a link to the job's channels. Everything else is shared: ``model/``, ``output/`` and above all
  ``output/tensors``: every worker of every host writes the one trial, as every host's uploads land under
  one S3 prefix on SageMaker (worker names keep the files apart).
* **Addresses.** The hosts are named ``algo-K`` but all are this machine: ``SM_MASTER_ADDR`` and
  ``MASTER_ADDR`` are ``127.0.0.1`` (``algo-1`` does not resolve here), ``SM_MASTER_PORT`` a port free when
  the job starts (SageMaker's is 7777; a free one lets jobs run side by side).
* **Devices.** ``SM_NUM_GPUS`` is true: the GPUs this machine has (``nvidia-smi``, honouring
  ``CUDA_VISIBLE_DEVICES``), divided among the hosts when there are at least as many as hosts (each host's
  ``CUDA_VISIBLE_DEVICES`` names its own), else every host sees them all. ``SM_NUM_CPUS`` is this machine's
  usable CPUs divided among the hosts (at least 1), so per-host thread and loader counts do not oversubscribe.
* **Logs.** Each host's processes log under ``logs/algo-K/`` (launcher.py); ``logs/training.log`` holds
  every line of every process, each led by where it came from.

:class:`EmulatedHost` is also the per-host hook point for anything that runs once per host (a system
monitor): the runner's ``hosts`` list, each with its name, rank, /opt/ml directories and log directory.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

MASTER_ADDR = "127.0.0.1"
NETWORK_INTERFACE = "eth0"
#: the directory (under the job dir) of hosts 2..N
HOSTS_DIR = "hosts"


@dataclass(frozen=True, slots=True)
class EmulatedHost:
    """One emulated instance of a job.

    Attributes:
        name: ``algo-K``.
        rank: K - 1 (``SM_CURRENT_HOST_RANK``).
        hosts: every host's name, in order (``SM_HOSTS``).
        root: its /opt/ml: the job directory for ``algo-1``, ``hosts/algo-K`` for the others.
        config_dir: its ``input/config`` (``SM_INPUT_CONFIG_DIR``), holding its own resourceconfig.json.
        log_dir: where its processes' own logs go (``logs/algo-K``).
        num_gpus: ``SM_NUM_GPUS``.
        num_cpus: ``SM_NUM_CPUS``.
        gpu_ids: its ``CUDA_VISIBLE_DEVICES``; None: as this machine's environment has it.
        instance_type: ``ResourceConfig.InstanceType``.
    """

    name: str
    rank: int
    hosts: tuple[str, ...]
    root: Path
    config_dir: Path
    log_dir: Path
    num_gpus: int
    num_cpus: int
    gpu_ids: tuple[str, ...] | None
    instance_type: str

    @property
    def input_dir(self) -> Path:
        return self.root / "input"

    @property
    def resource_config(self) -> dict[str, Any]:
        """``resourceconfig.json`` as SageMaker writes it on this host."""
        return {"current_host": self.name, "current_instance_type": self.instance_type,
                "current_group_name": "homogeneousCluster", "hosts": list(self.hosts),
                "instance_groups": [{"instance_group_name": "homogeneousCluster",
                                     "instance_type": self.instance_type, "hosts": list(self.hosts)}],
                "network_interface_name": NETWORK_INTERFACE}

    def to_json(self) -> dict[str, Any]:
        return {"Name": self.name, "Rank": self.rank, "Root": str(self.root), "ConfigDir": str(self.config_dir),
                "LogDir": str(self.log_dir), "NumGpus": self.num_gpus, "NumCpus": self.num_cpus,
                "GpuIds": list(self.gpu_ids) if self.gpu_ids is not None else None}


def instance_count(request: Mapping[str, Any]) -> int:
    """``ResourceConfig.InstanceCount`` (1 when absent); request checks refuse anything but a positive int."""
    value = (request.get("ResourceConfig") or {}).get("InstanceCount") or 1
    return int(value)


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def visible_gpus(environ: Mapping[str, str], *, smi: str | None = "nvidia-smi") -> list[str]:
    """This machine's GPUs as ``CUDA_VISIBLE_DEVICES`` entries: that variable's list when set, else the
    indices ``nvidia-smi --list-gpus`` prints (none without it)."""
    given = environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [d.strip() for d in given.split(",") if d.strip() and d.strip() != "-1"]
    program = shutil.which(smi) if smi else None
    if program is None:
        return []
    try:
        listing = subprocess.run([program, "--list-gpus"], capture_output=True, text=True, timeout=30,
                                 check=False).stdout
    except (OSError, subprocess.SubprocessError) as err:
        logger.info("nvidia-smi failed (%s): no GPUs", err)
        return []
    return [str(i) for i, line in enumerate(ln for ln in listing.splitlines() if ln.startswith("GPU "))]


def plan_hosts(job_root: Path, request: Mapping[str, Any], *, gpus: Sequence[str], cpus: int) -> list[EmulatedHost]:
    """The job's hosts (pure: nothing is written)."""
    count = instance_count(request)
    names = tuple(f"algo-{k}" for k in range(1, count + 1))
    instance_type = str((request.get("ResourceConfig") or {}).get("InstanceType") or "local")
    share = len(gpus) // count if len(gpus) >= count else 0
    hosts = []
    for rank, name in enumerate(names):
        root = job_root if rank == 0 else job_root / HOSTS_DIR / name
        ids = tuple(gpus[rank * share:(rank + 1) * share]) if share else None
        hosts.append(EmulatedHost(
            name=name, rank=rank, hosts=names, root=root, config_dir=root / "input" / "config",
            log_dir=job_root / "logs" / name, num_gpus=share if share else len(gpus),
            num_cpus=max(1, cpus // count), gpu_ids=ids if count > 1 else None, instance_type=instance_type))
    return hosts


def prepare_host(host: EmulatedHost, job_config: Path, job_data: Path) -> None:
    """Write the host's resourceconfig.json; for hosts 2..N also link the job's other config files and its
    data channels into the host's own /opt/ml (``job_config``/``job_data``: the job's, i.e. algo-1's)."""
    from sdk_ext.local.jobs.layout import write_json

    host.config_dir.mkdir(parents=True, exist_ok=True)
    host.log_dir.mkdir(parents=True, exist_ok=True)
    if host.config_dir != job_config:
        for source in sorted(job_config.glob("*.json")):
            target = host.config_dir / source.name
            if source.name != "resourceconfig.json" and not target.exists():
                target.symlink_to(source)  # a rewrite of the job's file (profilerconfig.json) is seen here too
        data = host.input_dir / "data"
        if not data.exists():
            data.symlink_to(job_data, target_is_directory=True)
    write_json(host.config_dir / "resourceconfig.json", host.resource_config)


def free_port(address: str = MASTER_ADDR) -> int:
    """A TCP port nobody listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def host_env(host: EmulatedHost, *, master_port: int) -> dict[str, str]:
    """The SM_* variables that differ between hosts (layout.training_env gives the rest)."""
    sm: dict[str, Any] = {
        "SM_HOSTS": list(host.hosts), "SM_CURRENT_HOST": host.name, "SM_HOST_COUNT": len(host.hosts),
        "SM_CURRENT_HOST_RANK": host.rank, "SM_MASTER_ADDR": MASTER_ADDR, "SM_MASTER_PORT": master_port,
        "SM_NUM_GPUS": host.num_gpus, "SM_NUM_CPUS": host.num_cpus, "SM_NETWORK_INTERFACE_NAME": NETWORK_INTERFACE,
        "SM_CURRENT_INSTANCE_TYPE": host.instance_type, "SM_INPUT_DIR": str(host.input_dir),
        "SM_INPUT_CONFIG_DIR": str(host.config_dir), "SM_INPUT_DATA_DIR": str(host.input_dir / "data"),
        "SM_RESOURCE_CONFIG": host.resource_config,
    }
    env = {key: value if isinstance(value, str) else json.dumps(value) for key, value in sm.items()}
    env["MASTER_ADDR"] = MASTER_ADDR  # SageMaker's PyTorch container sets these for env:// initialization
    env["MASTER_PORT"] = str(master_port)
    if host.gpu_ids is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(host.gpu_ids)
    return env


def training_env_update(training_env: str, host: EmulatedHost, *, master_port: int) -> str:
    """``SM_TRAINING_ENV`` (JSON) with this host's fields."""
    try:
        value = json.loads(training_env)
    except ValueError:
        value = {}
    value.update({"hosts": list(host.hosts), "current_host": host.name, "master_addr": MASTER_ADDR,
                  "master_port": master_port, "num_gpus": host.num_gpus, "num_cpus": host.num_cpus,
                  "current_instance_type": host.instance_type, "input_config_dir": str(host.config_dir),
                  "input_dir": str(host.input_dir), "resource_config": host.resource_config,
                  "network_interface_name": NETWORK_INTERFACE})
    return json.dumps(value)


__all__ = ["EmulatedHost", "MASTER_ADDR", "free_port", "host_env", "instance_count", "plan_hosts", "prepare_host",
           "training_env_update", "usable_cpus", "visible_gpus"]
