"""A local job's directory, shaped like a SageMaker training container's /opt/ml, and its environment.

::

    <job dir>/                            (stands for /opt/ml)
      input/config/hyperparameters.json   HyperParameters
      input/config/debughookconfig.json   DebugHookConfig, LocalPath = output/tensors (absolute)
      input/config/tensorboardoutputconfig.json   if TensorBoardOutputConfig is set
      input/config/resourceconfig.json    {"current_host": "algo-1", "hosts": ["algo-1", ...], ...} (hosts.py)
      input/config/profilerconfig.json    ProfilerConfig, LocalPath = profiler-output (absolute), if the request has one
      input/config/inputdataconfig.json   per channel: TrainingInputMode, S3DistributionType, ...
      input/data/<channel>                a symlink to the channel's local data (file:// or a path)
      model/  output/data/  output/failure (a script may write its failure reason there)
      output/tensors/                     the trial the hook writes and the rules read
      rules/<RuleConfigurationName>/      status.json and evaluator.log of each rule evaluation
      logs/training.log                   the entry point's stdout and stderr (every process's, each line led
                                          by its host and rank, when there are several: launcher.py)
      logs/algo-K/                        with several processes: each one's own log (rank-R.log)
      hosts/algo-K/input/config/          hosts 2..N: their own resourceconfig.json (hosts.py)
      profiler-output/                    system/ (the system monitor) and framework/ (the hooks' step timeline)
      request.json  job.json  events.jsonl   the request; DescribeTrainingJob as last seen; every event
      runner.json                         the claim on the job's name: which runner runs it (claim.py)
      code/                               a .tar.gz submit directory, unpacked (archive.py)

Container paths in the request (``DebugHookConfig.LocalPath``, ``TensorBoardOutputConfig.LocalPath``)
under /opt/ml are moved into the job directory.

The environment is what SageMaker's training toolkit gives a framework container's script
(``SM_MODEL_DIR``, ``SM_CHANNEL_<NAME>``, ``SM_HPS``, ``SM_HP_<NAME>``, ...) plus ``TRAINING_JOB_NAME``
and ``TRAINING_JOB_ARN`` (which tell the hook it runs inside a job: the runner, not the hook, then
writes the end-of-training marker), ``SMDEBUG_CONFIG_FILE_PATH`` / ``TENSORBOARD_CONFIG_FILE_PATH`` /
``SMPROFILER_CONFIG_PATH`` (the hook's config files here instead of /opt/ml) and the request's ``Environment``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sdk_ext.format.paths import END_OF_JOB
from sdk_ext.local.request import check as request_check
from sdk_ext.storage import uris

logger = logging.getLogger(__name__)

CONTAINER_ROOT = "/opt/ml"
HOST = "algo-1"


@dataclass(frozen=True, slots=True)
class JobDir:
    """The paths of one local job."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "input" / "config"

    @property
    def data(self) -> Path:
        return self.root / "input" / "data"

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def output(self) -> Path:
        return self.root / "output"

    @property
    def tensors(self) -> Path:
        return self.root / "output" / "tensors"

    @property
    def failure(self) -> Path:
        return self.root / "output" / "failure"

    @property
    def training_log(self) -> Path:
        return self.root / "logs" / "training.log"

    @property
    def profiler_output(self) -> Path:
        """Where profiling data goes (what SageMaker uploads to ``<S3OutputPath>/<job>/profiler-output``)."""
        return self.root / "profiler-output"

    @property
    def profiler_config(self) -> Path:
        return self.config / "profilerconfig.json"

    @property
    def job_json(self) -> Path:
        return self.root / "job.json"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def request_json(self) -> Path:
        return self.root / "request.json"

    def rule_dir(self, rule_configuration_name: str) -> Path:
        """``rules/<name>``; ValueError for a name that is not one directory name (see request_check)."""
        rules = self.root / "rules"
        if not request_check.one_below(rules, rule_configuration_name):
            raise ValueError(f"RuleConfigurationName {rule_configuration_name!r} is not a plain directory name")
        return rules / rule_configuration_name

    def rebase(self, container_path: str | None, default: Path) -> Path:
        """A container path (``/opt/ml/...``, normalized) inside this job directory; other paths as given
        (:func:`~sdk_ext.local.request.check.path_problems` refuses those before a job starts)."""
        if not container_path:
            return default
        return request_check.container_path(self.root, container_path) or Path(container_path)


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (temporary file, then rename): a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")  # one per writer
    try:
        tmp.write_text(json.dumps(value, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_end_marker(trial_dir: Path) -> None:
    """``training_job_end.ts``: what SageMaker writes when training ends (the hook does not, in a job)."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    tmp = trial_dir / f".{END_OF_JOB}.tmp"
    tmp.write_bytes(b"")
    os.replace(tmp, trial_dir / END_OF_JOB)


def local_source(uri: str) -> Path | None:
    """The local path of a ``file://`` URI (percent-decoded) or a plain path; None for s3:// and other schemes."""
    try:
        path = uris.local_path(uri)
    except ValueError:  # a file:// URI of another host
        return None
    return None if path is None else Path(path)


def decode_hyperparameter(value: str) -> Any:
    """SageMaker framework estimators JSON-encode hyperparameter values; the toolkit decodes them."""
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def hyperparameter_args(hyperparameters: Mapping[str, Any]) -> list[str]:
    """``--name value`` for each hyperparameter but the toolkit's own ``sagemaker_*`` ones."""
    args: list[str] = []
    for name, raw in hyperparameters.items():
        if name.startswith("sagemaker_"):
            continue
        value = decode_hyperparameter(raw) if isinstance(raw, str) else raw
        args += [f"--{name}", value if isinstance(value, str) else json.dumps(value)]
    return args


def _asks_for_tensorboard(hook_parameters: Mapping[str, Any]) -> bool:
    value = hook_parameters.get("export_tensorboard")
    return value is True or str(value).strip().lower() == "true" or bool(hook_parameters.get("tensorboard_dir"))


def prepare(job_dir: JobDir, request: Mapping[str, Any]) -> dict[str, Path]:
    """Create the directory tree and the config files. Returns the data channels' paths by name."""
    for d in (job_dir.config, job_dir.data, job_dir.model, job_dir.output / "data", job_dir.training_log.parent):
        d.mkdir(parents=True, exist_ok=True)
    write_json(job_dir.request_json, request)
    write_json(job_dir.config / "hyperparameters.json", dict(request.get("HyperParameters") or {}))
    hook = request.get("DebugHookConfig")
    if hook is not None:
        write_json(job_dir.config / "debughookconfig.json", {**hook, "LocalPath": str(trial_dir(job_dir, request))})
    board = request.get("TensorBoardOutputConfig")
    if board is None and hook is not None and _asks_for_tensorboard(hook.get("HookParameters") or {}):
        # Inside a job the hook exports TensorBoard files only when the platform gave it a
        # TensorBoardOutputConfig; a local job honours the hook parameter by giving it one.
        board = {"LocalPath": (hook.get("HookParameters") or {}).get("tensorboard_dir") or None}
    if board is not None:
        board_dir = job_dir.rebase(board.get("LocalPath"), job_dir.output / "tensorboard")
        write_json(job_dir.config / "tensorboardoutputconfig.json", {**board, "LocalPath": str(board_dir)})
    if request.get("ProfilerConfig") is not None:
        write_profiler_config(job_dir, request["ProfilerConfig"])
    resources = request.get("ResourceConfig") or {}
    # one host's view; the runner then writes each emulated host's own (hosts.py: InstanceCount hosts)
    write_json(job_dir.config / "resourceconfig.json",
               {"current_host": HOST, "current_instance_type": resources.get("InstanceType", "local"),
                "hosts": [HOST], "network_interface_name": "eth0"})
    channels: dict[str, Path] = {}
    input_config: dict[str, Any] = {}
    for channel in request.get("InputDataConfig") or []:
        name = channel["ChannelName"]
        source = (channel.get("DataSource") or {}).get("S3DataSource") or {}
        input_config[name] = {"TrainingInputMode": channel.get("InputMode", "File"),
                              "S3DistributionType": source.get("S3DataDistributionType", "FullyReplicated"),
                              "RecordWrapperType": channel.get("RecordWrapperType", "None")}
        if not request_check.one_below(job_dir.data, name):  # refused by check_paths already; never write outside
            raise ValueError(f"ChannelName {name!r} is not a plain directory name")
        target = job_dir.data / name
        local = local_source(source.get("S3Uri", ""))
        if local is not None and local.exists() and not target.exists():
            target.symlink_to(local.resolve(), target_is_directory=local.is_dir())
        elif not target.exists():
            logger.warning("channel %s: %r is not local data (file:// URI or path); the channel is empty",
                           name, source.get("S3Uri"))
            target.mkdir(parents=True)
        channels[name] = target
    write_json(job_dir.config / "inputdataconfig.json", input_config)
    return channels


def profiler_dir(job_dir: JobDir, profiler_config: Mapping[str, Any]) -> Path:
    """The profiler output of a ProfilerConfig: ``profiler-output/`` for SageMaker's default LocalPath
    (/opt/ml/output/profiler, which SageMaker uploads there), another LocalPath moved into the job dir."""
    local = (profiler_config.get("ProfilingParameters") or {}).get("LocalPath")
    if not local or local.rstrip("/") == f"{CONTAINER_ROOT}/output/profiler":
        return job_dir.profiler_output
    return job_dir.rebase(local, job_dir.profiler_output)


def write_profiler_config(job_dir: JobDir, profiler_config: Mapping[str, Any]) -> Path:
    """``input/config/profilerconfig.json``: the job's ProfilerConfig as SageMaker gives it to the container
    (what the hooks and the system monitor read; a rewrite is how a running job learns of UpdateTrainingJob),
    with ``ProfilingParameters.LocalPath`` inside the job dir. Returns the profiler output directory."""
    out = profiler_dir(job_dir, profiler_config)
    parameters = {**(profiler_config.get("ProfilingParameters") or {}), "LocalPath": str(out)}
    write_json(job_dir.profiler_config, {**profiler_config, "ProfilingParameters": parameters})
    return out


def trial_dir(job_dir: JobDir, request: Mapping[str, Any]) -> Path:
    """Where the hook writes tensors: DebugHookConfig.LocalPath moved into the job dir, or output/tensors."""
    hook = request.get("DebugHookConfig") or {}
    return job_dir.rebase(hook.get("LocalPath"), job_dir.tensors)


def training_env(
    job_dir: JobDir,
    request: Mapping[str, Any],
    *,
    arn: str,
    channels: Mapping[str, Path],
    entry_point: str,
    module_dir: Path,
    user_args: Sequence[str],
    base: Mapping[str, str],
) -> dict[str, str]:
    """The entry point's environment: ``base`` plus SageMaker's variables plus the request's Environment."""
    name = request["TrainingJobName"]
    hps = {k: decode_hyperparameter(v) if isinstance(v, str) else v
           for k, v in (request.get("HyperParameters") or {}).items()}
    user_hps = {k: v for k, v in hps.items() if not k.startswith("sagemaker_")}
    env = dict(base)
    sm: dict[str, Any] = {
        "SM_HOSTS": [HOST], "SM_CURRENT_HOST": HOST, "SM_NETWORK_INTERFACE_NAME": "eth0",
        "SM_NUM_CPUS": os.cpu_count() or 1, "SM_NUM_GPUS": 0,
        "SM_MODEL_DIR": str(job_dir.model), "SM_INPUT_DIR": str(job_dir.root / "input"),
        "SM_INPUT_CONFIG_DIR": str(job_dir.config), "SM_OUTPUT_DIR": str(job_dir.output),
        "SM_OUTPUT_DATA_DIR": str(job_dir.output / "data"),
        "SM_CHANNELS": sorted(channels), "SM_HPS": user_hps, "SM_USER_ARGS": list(user_args),
        "SM_USER_ENTRY_POINT": entry_point, "SM_MODULE_DIR": str(module_dir),
        "SM_MODULE_NAME": Path(entry_point).stem, "SM_LOG_LEVEL": 20,
        "SM_RESOURCE_CONFIG": {"current_host": HOST, "hosts": [HOST]},
    }
    for channel, path in channels.items():
        sm[f"SM_CHANNEL_{channel.upper()}"] = str(path)
    for key, value in user_hps.items():
        sm[f"SM_HP_{key.upper()}"] = value
    sm["SM_TRAINING_ENV"] = {"job_name": name, "hosts": [HOST], "current_host": HOST,
                             "model_dir": str(job_dir.model), "hyperparameters": user_hps,
                             "channel_input_dirs": {k: str(v) for k, v in channels.items()},
                             "output_data_dir": str(job_dir.output / "data"),
                             "module_dir": str(module_dir), "user_entry_point": entry_point}
    for key, value in sm.items():
        env[key] = value if isinstance(value, str) else json.dumps(value)
    env["TRAINING_JOB_NAME"] = name
    env["TRAINING_JOB_ARN"] = arn
    env["PYTHONUNBUFFERED"] = "1"
    config = job_dir.config / "debughookconfig.json"
    if config.is_file():
        env["SMDEBUG_CONFIG_FILE_PATH"] = str(config)
    else:
        env.pop("SMDEBUG_CONFIG_FILE_PATH", None)  # no hook config: no hook, as on SageMaker
    if job_dir.profiler_config.is_file():
        env["SMPROFILER_CONFIG_PATH"] = str(job_dir.profiler_config)
    else:
        env.pop("SMPROFILER_CONFIG_PATH", None)  # no ProfilerConfig: no profiling, as on SageMaker
    board = job_dir.config / "tensorboardoutputconfig.json"
    if board.is_file():
        env["TENSORBOARD_CONFIG_FILE_PATH"] = str(board)
    env.update({str(k): str(v) for k, v in (request.get("Environment") or {}).items()})
    return env
