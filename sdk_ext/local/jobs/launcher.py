"""How a job's training processes start on its emulated hosts (hosts.py), as SageMaker's containers decide it.

The request chooses, as the framework containers read it (first match):

* SDK v3 ``ModelTrainer(distributed=Torchrun(...))`` / ``MPI(...)``: the ``sm_drivers`` channel's
  ``distributed.json`` (a local channel: ``file://`` or a path). Each host gets ``SM_DISTRIBUTED_CONFIG``,
  ``SM_ENTRY_SCRIPT``, ``SM_SOURCE_DIR`` as v3's container scripts set them, and the entry script runs as
  its driver would run it: torchrun with ``process_count_per_node`` processes per host (else the host's
  GPUs, else 1), or mpirun.
* SDK v2 hyperparameters: ``sagemaker_torch_distributed_enabled`` (torchrun; processes per host: the
  host's GPUs, else 1), ``sagemaker_pytorch_ddp_enabled`` (SageMaker starts one process per GPU with
  ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` set; here the same as torchrun), ``sagemaker_mpi_enabled``
  (mpirun, ``sagemaker_mpi_num_of_processes_per_host``), ``sagemaker_multi_worker_mirrored_strategy_enabled``
  (TensorFlow: the script once per host with its ``TF_CONFIG``). ``sagemaker_distributed_dataparallel_enabled``
  (SageMaker's own smdistributed library, only in its containers) is refused before anything starts.
* Otherwise the entry point runs once per host (SageMaker's default).

``Environment.SDK_EXT_PROCESSES_PER_HOST`` (``sdk-ext run --processes-per-host P``) sets the processes per
host of any launcher: locally there are no GPUs to count, or fewer than a cluster's.

**torchrun.** Each rank is its own supervised process (processes.py: ended with the job, whatever it
starts) with the environment torchrun gives a worker: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``GROUP_WORLD_SIZE``, ``ROLE_RANK``, ``ROLE_WORLD_SIZE``, ``ROLE_NAME``,
``MASTER_ADDR``/``MASTER_PORT`` (rank 0's store), ``TORCHELASTIC_RUN_ID``, ``TORCHELASTIC_RESTART_COUNT``,
``TORCHELASTIC_MAX_RESTARTS``, ``OMP_NUM_THREADS=1`` unless set. torchrun's agent itself is not run: the
runner is the agent, so it knows which rank ended first and with what, and a stop reaches every rank.

**mpirun** (Open MPI, where installed; else a ConfigError before anything starts): one ``mpirun`` on
``algo-1`` starts every rank of every host on this machine, one application context per host
(``-np P -x SM_CURRENT_HOST=algo-K ...``), so each rank sees its host's environment.

**Failure.** The first rank to end with a non-zero code (not counting ranks ended by the job's own stop)
fails the job: every other rank on every host is stopped, and FailureReason names the rank, its host and
its log's last lines. A rank that ends with 0 while others train is fine.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.local.jobs import hosts as hosts_mod
from sdk_ext.local.jobs.hosts import EmulatedHost
from sdk_ext.local.jobs.processes import Child

logger = logging.getLogger(__name__)

PROCESS, TORCHRUN, MPIRUN = "process", "torchrun", "mpirun"
ENV_PROCESSES = "SDK_EXT_PROCESSES_PER_HOST"
V3_DRIVERS_CHANNEL, V3_CODE_CHANNEL = "sm_drivers", "code"

_TRUE = ("true", "1", "yes")
# a rank that failed because a peer went away first, not the cause (gloo, NCCL, the c10d store)
_PEER_LOST = re.compile(r"Connection closed by peer|Connection reset by peer|Broken pipe|NCCL communicator was "
                        r"aborted|recvBytes|Socket Timeout|Timed out waiting|DistNetworkError|TCPStore|"
                        r"ProcessGroupGloo.*(error|abort)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class V3Source:
    """An SDK v3 ModelTrainer request's code: what its ``sm_drivers`` channel says (local channels only)."""

    drivers_dir: Path
    distributed: dict[str, Any]
    source_code: dict[str, Any]
    code_dir: Path | None


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """How the entry point starts: ``kind`` (PROCESS, TORCHRUN or MPIRUN), ``processes_per_host`` and
    ``chosen_by`` (what in the request chose it, for job.json and messages)."""

    kind: str
    processes_per_host: int
    chosen_by: str
    tf_config: bool = False  # PROCESS: give each host TF_CONFIG (TensorFlow's MultiWorkerMirroredStrategy)

    def world_size(self, host_count: int) -> int:
        return host_count * self.processes_per_host


def _flag(hps: Mapping[str, Any], key: str) -> bool:
    value = hps.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    return str(value).strip().lower() in _TRUE


def _count(value: Any, where: str) -> int:
    try:
        number = int(json.loads(value) if isinstance(value, str) else value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise ConfigError(f"{where} = {value!r}: the processes per host must be a whole number >= 1",
                          where="CreateTrainingJob request")
    return number


def v3_source(request: Mapping[str, Any]) -> V3Source | None:
    """The v3 ModelTrainer layout, when the request has a local ``sm_drivers`` channel with its JSON files."""
    from sdk_ext.local.jobs.layout import local_source

    channels = {c.get("ChannelName"): ((c.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri", "")
                for c in request.get("InputDataConfig") or []}
    drivers = local_source(str(channels.get(V3_DRIVERS_CHANNEL) or "")) if V3_DRIVERS_CHANNEL in channels else None
    if drivers is None or not (drivers / "sourcecode.json").is_file():
        return None

    def read(name: str) -> dict[str, Any]:
        try:
            value = json.loads((drivers / name).read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError) as err:
            raise ConfigError(f"{drivers / name}: not readable JSON ({err})", where="sm_drivers channel") from err
        return value if isinstance(value, dict) else {}

    code = local_source(str(channels.get(V3_CODE_CHANNEL) or "")) if V3_CODE_CHANNEL in channels else None
    return V3Source(drivers_dir=drivers.resolve(), distributed=read("distributed.json"),
                    source_code=read("sourcecode.json"), code_dir=code.resolve() if code is not None else None)


def v3_env(source: V3Source) -> dict[str, str]:
    """What v3's container scripts (environment.py) export beyond the SM_* every job gets."""
    env = {"SM_SOURCE_DIR": str(source.code_dir or ""),
           "SM_ENTRY_SCRIPT": str(source.source_code.get("entry_script") or "")}
    if source.distributed:
        env["SM_DISTRIBUTED_DRIVER_DIR"] = str(source.drivers_dir / "distributed_drivers")
        env["SM_DISTRIBUTED_CONFIG"] = json.dumps(source.distributed)
    return env


def choose(request: Mapping[str, Any], *, host: EmulatedHost, v3: V3Source | None = None) -> LaunchPlan:
    """The launch plan the request asks for (the module docstring); ``host``: any host (its GPU count).

    Raises:
        ConfigError: a launcher that cannot run here (no mpirun, smdistributed), a bad process count.
    """
    hps = request.get("HyperParameters") or {}
    override = (request.get("Environment") or {}).get(ENV_PROCESSES)
    per_host = _count(override, f"Environment.{ENV_PROCESSES}") if override not in (None, "") else None
    default = per_host or host.num_gpus or 1
    if v3 is not None and v3.distributed and not v3.source_code.get("command"):
        given = v3.distributed.get("process_count_per_node")
        count = per_host or (_count(given, "distributed.json process_count_per_node") if given else default)
        if "mpi_additional_options" in v3.distributed:
            _require_mpirun("SDK v3 MPI (distributed.json)")
            return LaunchPlan(MPIRUN, count, "SDK v3 MPI (sm_drivers/distributed.json)")
        return LaunchPlan(TORCHRUN, count, "SDK v3 Torchrun (sm_drivers/distributed.json)")
    if _flag(hps, "sagemaker_distributed_dataparallel_enabled"):
        raise ConfigError(
            "HyperParameters.sagemaker_distributed_dataparallel_enabled asks for SageMaker's distributed data "
            "parallel library (smdistributed), which exists only in SageMaker's containers; locally use "
            "distribution={'torch_distributed': {'enabled': True}} (torchrun) or 'pytorchddp'",
            where="CreateTrainingJob request")
    if _flag(hps, "sagemaker_mpi_enabled"):
        given = hps.get("sagemaker_mpi_num_of_processes_per_host")
        count = per_host or (_count(given, "HyperParameters.sagemaker_mpi_num_of_processes_per_host")
                             if given not in (None, "") else 1)
        _require_mpirun("HyperParameters.sagemaker_mpi_enabled")
        return LaunchPlan(MPIRUN, count, "HyperParameters.sagemaker_mpi_enabled")
    for key in ("sagemaker_torch_distributed_enabled", "sagemaker_pytorch_ddp_enabled"):
        if _flag(hps, key):
            return LaunchPlan(TORCHRUN, default, f"HyperParameters.{key}")
    if _flag(hps, "sagemaker_multi_worker_mirrored_strategy_enabled"):
        return LaunchPlan(PROCESS, 1, "HyperParameters.sagemaker_multi_worker_mirrored_strategy_enabled",
                          tf_config=True)
    if per_host is not None and per_host > 1:
        return LaunchPlan(TORCHRUN, per_host, f"Environment.{ENV_PROCESSES}")
    return LaunchPlan(PROCESS, 1, "the entry point once per host (no distribution in the request)")


def _require_mpirun(what: str) -> None:
    program = shutil.which("mpirun")
    if program is None:
        raise ConfigError(f"{what} asks for mpirun, which is not installed here (PATH has no mpirun); install "
                          "Open MPI (e.g. apt-get install openmpi-bin) or use torchrun "
                          "(distribution={'torch_distributed': {'enabled': True}})", where="local job")
    try:
        version = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30,
                                 check=False).stdout
    except (OSError, subprocess.SubprocessError) as err:
        raise ConfigError(f"{what}: {program} --version failed ({err})", where="local job") from err
    if "Open MPI" not in version and "OpenRTE" not in version:
        raise ConfigError(f"{what}: {program} is not Open MPI (SageMaker's containers use Open MPI; it says "
                          f"{version.strip()[:80]!r})", where="local job")


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """One process the runner starts: a rank (torchrun), a host's entry point (PROCESS) or mpirun."""

    name: str
    host: EmulatedHost
    rank: int | None  # global rank (torchrun); None: the process has no rank of its own
    local_rank: int | None
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    prefix: str  # leads each of its lines in the job's training.log ("" for a one-process job)

    def describe(self) -> str:
        if self.rank is None:
            return self.host.name
        return f"rank {self.rank} (host {self.host.name}, local rank {self.local_rank})"


def torchrun_env(*, rank: int, local_rank: int, host: EmulatedHost, per_host: int, master_port: int,
                 run_id: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What torchrun gives one worker (static rendezvous on MASTER_ADDR:MASTER_PORT, no agent store)."""
    world = per_host * len(host.hosts)
    env = {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world),
           "LOCAL_WORLD_SIZE": str(per_host), "GROUP_RANK": str(host.rank), "GROUP_WORLD_SIZE": str(len(host.hosts)),
           "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world), "ROLE_NAME": "default",
           "MASTER_ADDR": hosts_mod.MASTER_ADDR, "MASTER_PORT": str(master_port), "TORCHELASTIC_RUN_ID": run_id,
           "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
           "TORCHELASTIC_USE_AGENT_STORE": "False", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    if per_host > 1 and "OMP_NUM_THREADS" not in environ:
        env["OMP_NUM_THREADS"] = "1"  # as torchrun: P processes must not each take every core
    return env


def tf_config(hosts: Sequence[EmulatedHost], host: EmulatedHost, ports: Sequence[int]) -> str:
    """``TF_CONFIG`` for TensorFlow's MultiWorkerMirroredStrategy, as SageMaker's TF container builds it."""
    return json.dumps({"cluster": {"worker": [f"{hosts_mod.MASTER_ADDR}:{p}" for p in ports]},
                       "environment": "cloud", "task": {"type": "worker", "index": host.rank}})


def process_specs(plan: LaunchPlan, hosts: Sequence[EmulatedHost], argv: Sequence[str], *,
                  host_env: Callable[[EmulatedHost], dict[str, str]], run_id: str, master_port: int,
                  single_log: Path) -> list[ProcessSpec]:
    """Every process to start. ``host_env(host)``: that host's whole environment; ``single_log``: the log
    of a job that runs one process (the job's training.log, as before hosts existed)."""
    if plan.kind == MPIRUN:
        return [_mpirun_spec(plan, hosts, argv, host_env=host_env)]
    specs: list[ProcessSpec] = []
    one = len(hosts) == 1 and plan.processes_per_host == 1
    if plan.kind == PROCESS:
        ports = [hosts_mod.free_port() for _ in hosts] if plan.tf_config else []
        for host in hosts:
            env = host_env(host)
            if plan.tf_config:
                env["TF_CONFIG"] = tf_config(hosts, host, ports)
            specs.append(ProcessSpec(host.name, host, None, None, list(argv), env,
                                     single_log if one else host.log_dir / "training.log",
                                     "" if one else f"[{host.name}] "))
        return specs
    per_host = plan.processes_per_host
    for host in hosts:
        base = host_env(host)
        for local in range(per_host):
            rank = host.rank * per_host + local
            env = {**base, **torchrun_env(rank=rank, local_rank=local, host=host, per_host=per_host,
                                          master_port=master_port, run_id=run_id, environ=base)}
            specs.append(ProcessSpec(f"{host.name} rank {rank}", host, rank, local, list(argv), env,
                                     single_log if one else host.log_dir / f"rank-{rank}.log",
                                     "" if one else f"[{host.name} rank {rank}] "))
    return specs


def _mpirun_spec(plan: LaunchPlan, hosts: Sequence[EmulatedHost], argv: Sequence[str], *,
                 host_env: Callable[[EmulatedHost], dict[str, str]]) -> ProcessSpec:
    first = host_env(hosts[0])
    command = [shutil.which("mpirun") or "mpirun"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-run-as-root")
    command += ["--oversubscribe", "--tag-output"]
    for i, host in enumerate(hosts):
        env = host_env(host)
        differ = sorted(k for k, v in env.items() if first.get(k) != v)
        if i:
            command.append(":")
        command += ["-np", str(plan.processes_per_host)]
        for key in differ or ["SM_CURRENT_HOST"]:
            command += ["-x", f"{key}={env[key]}"]
        command += list(argv)
    return ProcessSpec("mpirun", hosts[0], None, None, command, first, hosts[0].log_dir / "mpirun.log",
                       "" if len(hosts) == 1 and plan.processes_per_host == 1 else "[mpirun] ")


class CombinedLog:
    """``logs/training.log`` of a job with several processes: each line of each, led by its prefix, also
    given to ``output`` (the console). Thread-safe: each process's output is pumped by its own thread."""

    def __init__(self, path: Path, output: Callable[[str], None] | None) -> None:
        self.path = path
        self.output = output
        self._lock = threading.Lock()  # guards _file
        self._file: IO[str] | None = None
        self.error: OSError | None = None

    def sink(self, prefix: str) -> Callable[[str], None]:
        def write(line: str) -> None:
            text = prefix + line
            with self._lock:
                if self.error is None:
                    try:
                        if self._file is None:
                            self.path.parent.mkdir(parents=True, exist_ok=True)
                            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
                        self._file.write(text + "\n")
                        self._file.flush()
                    except OSError as err:  # a full disk: the processes' own logs say what they can
                        self.error = err
            if self.output is not None:
                self.output(text)
        return write

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError:
                    pass
                self._file = None


@dataclass
class TrainingGroup:
    """The training processes of a job, supervised together: started, polled, stopped as one."""

    specs: list[ProcessSpec]
    children: list[Child] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)  # index -> exit code, once ended
    first_failure: tuple[ProcessSpec, Child, int] | None = None
    stopping: bool = False  # the job stops them (StopTrainingJob, a failed rank): later exits are no failures

    def start(self, spawn: Callable[[ProcessSpec], Child]) -> None:
        """Start every process (each through ``spawn``). Raises OSError if one cannot start; those started
        are then left to the caller to stop (they are in ``children``)."""
        for spec in self.specs:
            self.children.append(spawn(spec))

    def poll(self) -> int | None:
        """None while a process runs; then 0 when every one ended with 0, else the first failure's code
        (or, after a stop, the first non-zero code)."""
        failed_now: list[int] = []
        for i, child in enumerate(self.children):
            if i in self.codes:
                continue
            code = child.poll()
            if code is None:
                continue
            self.codes[i] = code
            if code != 0 and not self.stopping:
                failed_now.append(i)
        if failed_now and self.first_failure is None:
            i = min(failed_now, key=lambda j: (self._lost_a_peer(j), j))
            self.first_failure = (self.specs[i], self.children[i], self.codes[i])
        if len(self.codes) < len(self.children):
            return None
        if self.first_failure is not None:
            return self.first_failure[2]
        return next((code for code in self.codes.values() if code != 0), 0)

    def _lost_a_peer(self, i: int) -> bool:
        """Did this process fail because another went away (several ended within one poll)?"""
        return bool(_PEER_LOST.search(self.children[i].output_tail(2000)))

    def running(self) -> list[Child]:
        return [c for i, c in enumerate(self.children) if i not in self.codes]

    def terminate(self) -> None:
        """SIGTERM to every process that still runs (each once)."""
        self.stopping = True
        for child in self.running():
            child.terminate()

    def escalate(self, grace: float) -> None:
        for child in self.running():
            child.escalate(grace)

    def describe(self) -> list[dict[str, Any]]:
        """Per process, for job.json: its rank, host, pid, exit code and log."""
        return [{"Name": s.name, "Host": s.host.name, "Rank": s.rank, "LocalRank": s.local_rank,
                 "Pid": c.pid, "ExitCode": self.codes.get(i), "Log": str(s.log_path)}
                for i, (s, c) in enumerate(zip(self.specs, self.children, strict=False))]


def log_tail(text: str, *, lines: int = 12, limit: int = 1200) -> str:
    """The last non-empty ``lines`` lines of ``text``, at most ``limit`` characters."""
    kept = [ln.rstrip() for ln in text.splitlines() if ln.strip()][-lines:]
    out = "\n".join(kept)
    return out if len(out) <= limit else "..." + out[-(limit - 3):]


__all__ = ["CombinedLog", "LaunchPlan", "MPIRUN", "PROCESS", "ProcessSpec", "TORCHRUN", "TrainingGroup",
           "V3Source", "choose", "log_tail", "process_specs", "tf_config", "torchrun_env", "v3_env", "v3_source"]
