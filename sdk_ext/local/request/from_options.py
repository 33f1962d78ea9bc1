"""Building a CreateTrainingJob request from ``sdk-ext`` options (``--rule``, ``--collection``, ...).

The request is what the v2 Estimator would send (``apply_debugger``), so a request saved by a local run
(``request.json`` in its job directory) can be sent to SageMaker, and ``sdk-ext run --request`` runs
one made for SageMaker. S3 paths in it are placeholders locally: the job directory holds everything.
"""

from __future__ import annotations

import difflib
import json
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import smdebug_rulesconfig as rule_configs
from smdebug_rulesconfig.profiler_rules import rules as profiler_configs

from sdk_ext.debugger import (
    CollectionConfig,
    DebuggerHookConfig,
    ProfilerRule,
    Rule,
    SdkExtRuleImageWarning,
    apply_debugger,
    replica_divergence,
)
from sdk_ext.exceptions import ConfigError
from sdk_ext.rules.builtin import BUILTIN_RULES, PROFILER_RULE_NAMES

LOCAL_OUTPUT = "s3://sdk-ext-local/output"  # a placeholder: local jobs write into their job directory
REGION = "us-east-1"  # only names the (unused) rule images
#: sdk_ext's own built-in rules: the name the CLI takes -> its base config
SDK_EXT_RULE_CONFIGS: dict[str, Callable[[], dict[str, Any]]] = {"ReplicaDivergence": replica_divergence}
#: Hook parameters a rule needs unless the options set them (ReplicaDivergence compares every worker's copy)
RULE_HOOK_PARAMETERS: dict[str, dict[str, str]] = {"replicadivergence": {"include_workers": "all"}}


class LocalSourceUploader:
    """A custom rule's source stays where it is: the local evaluator reads ``file://`` URIs."""

    def upload(self, local_path: str, *, rule_name: str, default_prefix: str | None) -> str:
        return Path(local_path).resolve().as_uri()


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def builtin_rule(name: str) -> dict[str, Any]:
    """``rule_configs.<rule>()`` for a built-in rule named like SageMaker does (case and ``_`` ignored).

    Raises:
        ConfigError: no such rule (the message lists them).
    """
    table = {_key(n): n for n in dir(rule_configs) if not n.startswith("_") and n.islower()
             and callable(getattr(rule_configs, n))}
    table = {k: v for k, v in table.items() if isinstance(_call(v), Mapping) and "DebugRuleConfiguration" in _call(v)}
    table.update({_key(n): n for n in SDK_EXT_RULE_CONFIGS})
    runnable = {_key(n) for n in BUILTIN_RULES}  # the evaluator's; rulesconfig also has report rules
    found = table.get(_key(name))
    if found is not None and _key(name) not in runnable:
        raise ConfigError(f"--rule {name!r} is a SageMaker report rule, which the local rule evaluator does not "
                          f"run; tensor rules: {', '.join(sorted(BUILTIN_RULES))}", where="arguments")
    table = {k: v for k, v in table.items() if k in runnable}
    if found is None:
        names = sorted(_call(v)["DebugRuleConfiguration"]["RuleConfigurationName"] for v in table.values())
        candidates = [*names, *PROFILER_RULE_NAMES]
        close = difflib.get_close_matches(_key(name), [_key(n) for n in candidates], n=1, cutoff=0.6)
        guess = next((f"did you mean {n}? " for n in candidates if close and _key(n) == close[0]), "")
        raise ConfigError(f"--rule {name!r}: not a built-in rule; {guess}choose one of {', '.join(names)} "
                          f"(or --custom-rule FILE.py:CLASS); profiler rules: {', '.join(PROFILER_RULE_NAMES)}",
                          where="arguments")
    config: dict[str, Any] = _call(found)
    return config


def profiler_rule(name: str, parameters: Mapping[str, str] | None) -> ProfilerRule | None:
    """``ProfilerRule.sagemaker(rule_configs.<Rule>())`` for a profiler rule named like SageMaker does (case and
    ``_`` ignored), with ``parameters`` (strings, checked by the rule evaluator) over rulesconfig's defaults;
    None when ``name`` is not a profiler rule."""
    canonical = next((n for n in PROFILER_RULE_NAMES if _key(n) == _key(name)), None)
    if canonical is None:
        return None
    base = getattr(profiler_configs, canonical, None)  # OverallFrameworkMetrics is not in rulesconfig
    config = base() if base is not None else type(canonical, (profiler_configs.ProfilerRuleBase,), {})()
    config.rule_parameters.update(parameters or {})
    return ProfilerRule.sagemaker(config)


def _call(function_name: str) -> Any:
    own = SDK_EXT_RULE_CONFIGS.get(function_name)
    try:
        return own() if own is not None else getattr(rule_configs, function_name)()
    except TypeError:
        return None


def split_param(text: str, option: str, *, named: bool) -> tuple[str, str, str]:
    """``NAME:KEY=VALUE`` (named) or ``KEY=VALUE`` -> (name, key, value)."""
    name, rest = "", text
    if named:
        name, sep, rest = text.partition(":")
        if not sep or not name:
            raise ConfigError(f"{option} {text!r}: expected NAME:KEY=VALUE, e.g. {option} "
                              "LossNotDecreasing:num_steps=5", where="arguments")
    key, sep, value = rest.partition("=")
    if not sep or not key:
        example = "NAME:KEY=VALUE" if named else "KEY=VALUE"
        raise ConfigError(f"{option} {text!r}: expected {example}", where="arguments")
    return name, key, value


def _grouped(items: Sequence[str], option: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for item in items:
        name, key, value = split_param(item, option, named=True)
        out.setdefault(name, {})[key] = value
    return out


def default_job_name(script: Path, now: datetime | None = None) -> str:
    """``<script stem>-<UTC time>``, cut to SageMaker's 63 characters of letters, digits and hyphens."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S-%f")[:-3]
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", script.stem).strip("-") or "job"
    return f"{stem[: 62 - len(stamp)]}-{stamp}"


def build_request(
    *,
    script: Path | None,
    base: Mapping[str, Any] | None,
    job_name: str | None,
    rules: Sequence[str] = (),
    rule_params: Sequence[str] = (),
    custom_rules: Sequence[str] = (),
    collections: Sequence[str] = (),
    collection_params: Sequence[str] = (),
    hook_params: Sequence[str] = (),
    hyperparameters: Sequence[str] = (),
    save_interval: int | None = None,
    default_save_interval: int | None = None,
    profile_ms: int | None = None,
) -> dict[str, Any]:
    """The request for ``sdk-ext run``: ``base`` (a saved request) or a new one for ``script``, with the
    options applied through ``apply_debugger``.

    Raises:
        ConfigError / DebuggerConfigError: every bad option, named.
    """
    if base is not None:
        request = dict(base)
    else:
        assert script is not None
        request = {
            "AlgorithmSpecification": {"TrainingImage": "sdk-ext-local", "TrainingInputMode": "File"},
            "RoleArn": "arn:aws:iam::000000000000:role/sdk-ext-local",
            "OutputDataConfig": {"S3OutputPath": LOCAL_OUTPUT},
            "ResourceConfig": {"InstanceType": "local", "InstanceCount": 1, "VolumeSizeInGB": 1},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        }
    if job_name is not None or "TrainingJobName" not in request:
        request["TrainingJobName"] = job_name or default_job_name(script or Path("job"))
    hps = dict(request.get("HyperParameters") or {})
    for item in hyperparameters:
        _, key, value = split_param(item, "--hyperparameter", named=False)
        hps[key] = value
    if script is not None:
        hps["sagemaker_program"] = json.dumps(script.name)
        hps["sagemaker_submit_directory"] = json.dumps(str(script.resolve().parent))
    request["HyperParameters"] = hps
    per_rule = _grouped(rule_params, "--rule-param")
    per_collection = _grouped(collection_params, "--collection-param")
    named = {_key(r) for r in rules} | {_key(c.rpartition(":")[2]) for c in custom_rules}
    unknown = [n for n in per_rule if _key(n) not in named]
    if unknown:
        raise ConfigError(f"--rule-param for {unknown}, which no --rule or --custom-rule names", where="arguments")
    rule_objects: list[Any] = []
    profiler_rules: list[ProfilerRule] = []
    for name in rules:
        params = next((p for n, p in per_rule.items() if _key(n) == _key(name)), None)
        as_profiler = profiler_rule(name, params)
        if as_profiler is not None:
            profiler_rules.append(as_profiler)
            continue
        rule_objects.append(Rule.sagemaker(builtin_rule(name), rule_parameters=params))
    for spec in custom_rules:
        path, sep, cls = spec.rpartition(":")
        if not sep or not path or not cls:
            raise ConfigError(f"--custom-rule {spec!r}: expected FILE.py:CLASS", where="arguments")
        params = next((p for n, p in per_rule.items() if _key(n) == _key(cls)), None)
        rule_objects.append(Rule.custom(name=cls, image_uri="sdk-ext-local", instance_type="local",
                                        volume_size_in_gb=1, source=str(Path(path).resolve()), rule_to_invoke=cls,
                                        rule_parameters=params))
    names = list(dict.fromkeys([*collections, *per_collection]))
    hook_parameters = dict(split_param(h, "--hook-param", named=False)[1:] for h in hook_params)
    for name in rules:
        for key, value in RULE_HOOK_PARAMETERS.get(_key(name), {}).items():
            hook_parameters.setdefault(key, value)
    saving = _save_settings(hook_parameters, save_interval, default_save_interval)
    hook_parameters.update(saving)
    touches_hook = bool(names or hook_parameters or rule_objects or profiler_rules) or "DebugHookConfig" not in request
    if touches_hook:
        existing = request.get("DebugHookConfig") or {}
        hook = DebuggerHookConfig(
            s3_output_path=existing.get("S3OutputPath") or LOCAL_OUTPUT,
            hook_parameters={**(existing.get("HookParameters") or {}), **hook_parameters} or None,
            collection_configs=[CollectionConfig(n, per_collection.get(n)) for n in names] or None)
        request.pop("DebugHookConfig", None)
        existing_collections = existing.get("CollectionConfigurations") or []
        # a request's own ProfilerConfig is kept; a new job profiles only with --profile or a profiler rule
        # (which gets SageMaker's default ProfilerConfig, as the v2 Estimator gives it)
        profiles = "ProfilerConfig" in request or bool(profiler_rules)
        if profiler_rules and not (request.get("OutputDataConfig") or {}).get("S3OutputPath"):
            request["OutputDataConfig"] = {**(request.get("OutputDataConfig") or {}), "S3OutputPath": LOCAL_OUTPUT}
        existing_profiler_rules = list(request.get("ProfilerRuleConfigurations") or [])
        with warnings.catch_warnings():  # the local evaluator has sdk_ext's own rules (not SageMaker's image)
            warnings.simplefilter("ignore", SdkExtRuleImageWarning)
            request = apply_debugger(request, debugger_hook_config=hook,
                                     rules=[*rule_objects, *profiler_rules] or None, region=REGION,
                                     disable_profiler=None if profiles else True, uploader=LocalSourceUploader())
        if existing_profiler_rules and profiler_rules:
            request["ProfilerRuleConfigurations"] = [*existing_profiler_rules,
                                                     *request.get("ProfilerRuleConfigurations", [])]
        request["DebugHookConfig"]["CollectionConfigurations"] = [
            *existing_collections, *request["DebugHookConfig"]["CollectionConfigurations"]]
    for collection in request["DebugHookConfig"]["CollectionConfigurations"] if saving else ():
        _follow_hook(collection, saving, per_collection.get(collection.get("CollectionName", "")) or {},
                     save_interval)
    if profile_ms is not None:  # --profile: system monitoring and the step timeline, at this interval
        existing_profiler = request.get("ProfilerConfig") or {}
        request["ProfilerConfig"] = {
            **{k: v for k, v in existing_profiler.items() if k in ("ProfilingParameters",)},
            "S3OutputPath": existing_profiler.get("S3OutputPath")
            or (request.get("OutputDataConfig") or {}).get("S3OutputPath") or LOCAL_OUTPUT,
            "DisableProfiler": False, "ProfilingIntervalInMilliseconds": profile_ms}
    return request


_SAVE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
_MODE_PREFIXES = ("train.", "eval.", "predict.", "global.")


def _is_save_key(key: str) -> bool:
    for prefix in _MODE_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):] in _SAVE_KEYS
    return key in _SAVE_KEYS


def _save_settings(hook_parameters: Mapping[str, str], save_interval: int | None,
                   default_save_interval: int | None) -> dict[str, str]:
    """The hook-level save settings this command line gives: ``--hook-param`` save keys (``save_interval``,
    ``train.save_interval``, ...) and ``--save-interval``; the default interval only where neither says one.

    Raises:
        ConfigError: ``--save-interval`` and ``--hook-param save_interval`` disagree (two explicit settings).
    """
    given = {k: str(v) for k, v in hook_parameters.items() if _is_save_key(k)}
    if save_interval is not None:
        if "save_interval" in given and given["save_interval"].strip() != str(save_interval):
            raise ConfigError(f"--save-interval {save_interval} and --hook-param save_interval="
                              f"{given['save_interval']} disagree; give one of them", where="arguments")
        given["save_interval"] = str(save_interval)
    elif default_save_interval is not None and "save_interval" not in given:
        given["save_interval"] = str(default_save_interval)  # a default: it fills in, never overrides
    return given


def _follow_hook(collection: dict[str, Any], saving: Mapping[str, str], own: Mapping[str, str],
                 save_interval: int | None) -> None:
    """A collection follows the command line's hook-level save settings (a rule's 500-step default is
    replaced: a collection's keys would override the hook's), except where its own ``--collection-param``
    sets the key; that and ``--save-interval`` (meant for every collection) disagreeing is refused."""
    name = collection.get("CollectionName", "")
    params = collection.setdefault("CollectionParameters", {})
    for key, value in saving.items():
        if key in own:
            if key == "save_interval" and save_interval is not None and str(own[key]).strip() != str(save_interval):
                raise ConfigError(f"--save-interval {save_interval} (every collection) and --collection-param "
                                  f"{name}:save_interval={own[key]} disagree; give one of them", where="arguments")
            continue
        params[key] = value


#: the SDK v2 hyperparameters by which a request names its launcher (sdk_ext/local/jobs/launcher.py)
LAUNCHER_FLAGS = ("sagemaker_torch_distributed_enabled", "sagemaker_pytorch_ddp_enabled", "sagemaker_mpi_enabled",
                  "sagemaker_distributed_dataparallel_enabled", "sagemaker_multi_worker_mirrored_strategy_enabled")
PROCESSES_ENV = "SDK_EXT_PROCESSES_PER_HOST"


def with_cluster(request: Mapping[str, Any], *, instance_count: int | None,
                 processes_per_host: int | None) -> dict[str, Any]:
    """``--instance-count N`` / ``--processes-per-host P`` applied to a request (a new dict): N becomes
    ``ResourceConfig.InstanceCount``; P becomes ``Environment.SDK_EXT_PROCESSES_PER_HOST`` and, when the
    request names no launcher, torchrun (``sagemaker_torch_distributed_enabled``, as SDK v2's
    ``distribution={"torch_distributed": {"enabled": True}}`` sends it), so request.json runs the same again.

    Raises:
        ConfigError: a count below 1.
    """
    problems = [f"{option} {value}: must be 1 or more" for option, value in
                (("--instance-count", instance_count), ("--processes-per-host", processes_per_host))
                if value is not None and value < 1]
    if problems:
        raise ConfigError(problems, where="arguments")
    out = dict(request)
    if instance_count is not None:
        out["ResourceConfig"] = {**(out.get("ResourceConfig") or {}), "InstanceCount": instance_count}
    if processes_per_host is not None:
        out["Environment"] = {**(out.get("Environment") or {}), PROCESSES_ENV: str(processes_per_host)}
        hps = dict(out.get("HyperParameters") or {})
        if not any(key in hps for key in LAUNCHER_FLAGS):
            hps["sagemaker_torch_distributed_enabled"] = "true"
            out["HyperParameters"] = hps
    return out
