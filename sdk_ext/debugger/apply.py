"""apply_debugger: the v2 Estimator's Debugger logic, applied to a CreateTrainingJob request.

Given a request (from SageMaker SDK v3's ModelTrainer, a v2 Estimator or hand-written for boto3)
and the Debugger objects, return a new request with the five Debugger keys set the way
``Estimator.fit`` set them (reference: SageMaker SDK 2.257.7):

- ``DebugHookConfig``: created with the job's ``OutputDataConfig.S3OutputPath`` unless
  ``debugger_hook_config=False``; the collections every debugger rule needs are merged into it.
- ``DebugRuleConfigurations`` / ``ProfilerRuleConfigurations``: built-in rules get the regional
  rule-evaluator image (and lose instance settings, the service picks them); local rule sources are
  uploaded first; rule actions get ``action_json``.
- ``ProfilerConfig``: system monitoring on by default, off on request, in unsupported regions and on
  Trainium; ``Profiler()`` adds the detailed-profiler processing job.
- ``TensorBoardOutputConfig``: as given.
- ``Tags``: only with ``auto_stop_opt_in_tag``, which adds the auto-stop stack's opt-in tag.

Keys already in the request that no argument configures are kept (a present ``DebugHookConfig`` is
the hook rule collections merge into; present rule lists are kept and the new rules appended); an
argument that configures a key replaces it. Every problem is collected and raised as one
DebuggerConfigError before any upload. Deliberately unlike the SDK: nothing passed in is modified,
collections keep first-seen order, and a checkpointed single-instance framework job keeps its hook.

:func:`apply_debugger` runs these steps in order: check the arguments; read the job's facts
(:class:`JobPlan`); decide the hook, the rules and the profiler (:func:`_decide`, which only collects
problems); report every problem at once; warn about what SageMaker would ignore
(:func:`_warn_about`); upload local rule sources; write the new request (:func:`_build_request`).
"""

from __future__ import annotations

import copy
import logging
import os.path
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sdk_ext.debugger.collection import CollectionConfig
from sdk_ext.debugger.errors import DebuggerConfigError, Problems, is_s3_uri
from sdk_ext.debugger.hook_config import DebuggerHookConfig, TensorBoardOutputConfig
from sdk_ext.debugger.images import (
    DETAILED_PROFILER_RULE_PREFIX,
    get_rule_container_image_uri,
    image_uri_problem,
    instance_type_disables_profiler,
    region_supports_debugger,
    region_supports_profiler,
)
from sdk_ext.debugger.profiler import ProfilerConfig
from sdk_ext.debugger.rules import (
    DEFAULT_RULE_EVALUATOR_IMAGE,
    ProfilerRule,
    Rule,
    RuleBase,
    get_default_profiler_processing_job,
)
from sdk_ext.debugger.sdk_ext_rules import SDK_EXT_RULE_NAMES, SdkExtRuleImageWarning
from sdk_ext.debugger.sources import RuleSourceUploader, S3RuleSourceUploader, local_source_path

logger = logging.getLogger(__name__)

DEBUGGER_KEYS = ("DebugHookConfig", "DebugRuleConfigurations", "TensorBoardOutputConfig", "ProfilerConfig",
                 "ProfilerRuleConfigurations")
_SDK_KEY_ORDER = ("DebugRuleConfigurations", "DebugHookConfig", "TensorBoardOutputConfig",
                  "ProfilerRuleConfigurations", "ProfilerConfig")
_CHECKPOINT_FRAMEWORKS = frozenset({"mxnet", "pytorch", "tensorflow"})
_XGBOOST_ONLY_RULES = frozenset({"TreeDepth", "FeatureImportanceOverweight"})
# First version whose framework profiling collects nothing (SageMaker SDK v2's thresholds).
_FRAMEWORK_PROFILING_ENDS = {"pytorch": (2, 0), "tensorflow": (2, 12)}
_IMAGE_TAG_VERSION = re.compile(r"^(\d+(?:\.\d+)*)-(?:cpu|gpu)-py\d*")
AUTO_STOP_OPT_IN_VALUE = "true"  # the value the auto-stop function's opt-in tag must have (lambda/ checks it)
# SageMaker's tag key pattern (letters, digits, spaces and _.:/=+-@; 1-128), without the reserved aws: prefix;
# the same as the auto-stop deployment's opt_in_tag check (infra/, lambda/auto_stop_policy.py).
_TAG_KEY = re.compile(r"(?!aws:)[\w .:/=+\-@]{1,128}")
_MAX_TAGS = 50  # CreateTrainingJob's limit

_AnyRule = TypeVar("_AnyRule", bound=RuleBase)


class _Job:
    """The facts of the request the Debugger logic depends on."""

    def __init__(self, request: Mapping[str, Any]) -> None:
        self.name: str | None = request.get("TrainingJobName")
        self.output_path: str | None = (request.get("OutputDataConfig") or {}).get("S3OutputPath")
        resources = request.get("ResourceConfig") or {}
        groups = resources.get("InstanceGroups") or []
        self.instance_types = [t for t in [resources.get("InstanceType"), *(g.get("InstanceType") for g in groups)] if t]
        self.instance_count = int(resources.get("InstanceCount") or sum(int(g.get("InstanceCount") or 0)
                                                                        for g in groups) or 1)
        checkpoint = request.get("CheckpointConfig") or {}
        self.checkpointed = bool(checkpoint.get("S3Uri") and checkpoint.get("LocalPath"))
        flag = (request.get("HyperParameters") or {}).get("sagemaker_parameter_server_enabled")
        self.parameter_server = str(flag).strip('"').lower() == "true"
        self.training_image: str = (request.get("AlgorithmSpecification") or {}).get("TrainingImage") or ""


def _snake(name: str) -> str:
    """``ReplicaDivergence`` -> ``replica_divergence`` (the base-config function's name)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class JobPlan:
    """One request's facts, the problems found so far, and the rule sources to upload.

    Shared with :mod:`sdk_ext.debugger.update`, which prepares rules for a running job the same way.
    """

    def __init__(self, request: Mapping[str, Any], region: str, problems: Problems,
                 now: Callable[[], datetime] | None) -> None:
        self.job = _Job(request)
        self.region = region
        self.problems = problems
        self.now = now
        self.uploads: list[tuple[RuleBase, str]] = []  # (prepared rule, local path)

    def output_path(self, purpose: str) -> str | None:
        path = self.job.output_path
        if not is_s3_uri(path):
            self.problems.add(
                f"{purpose} defaults to the job's OutputDataConfig.S3OutputPath, but the request has "
                f"{path!r}; set OutputDataConfig.S3OutputPath to an s3:// URI or give the path explicitly")
            return None
        return path

    def prepare_rule(self, rule: _AnyRule) -> _AnyRule:
        """A copy of ``rule`` ready to send (image, instance settings, actions); uploads are queued."""
        prepared: _AnyRule = rule.copy_with()
        if rule.image_uri == DEFAULT_RULE_EVALUATOR_IMAGE:
            invoked = rule.rule_parameters.get("rule_to_invoke")
            if invoked in SDK_EXT_RULE_NAMES:
                warnings.warn(
                    f"rule {rule.name!r} ({invoked}) is sdk_ext's own: SageMaker's rule image does not have it, so on "
                    "SageMaker its evaluation would end in Error. It runs in sdk_ext's evaluator: locally (sdk-ext "
                    "run, sdk_ext.local), or on SageMaker with the image rules/Dockerfile builds, pushed to your ECR "
                    f"and given as {_snake(str(invoked))}(image_uri=...)", SdkExtRuleImageWarning, stacklevel=2)
            problem = image_uri_problem(rule.name, self.region)
            if problem is not None:
                self.problems.add(problem)
            else:
                prepared.image_uri = get_rule_container_image_uri(rule.name, self.region)
            if not rule.name.startswith(DETAILED_PROFILER_RULE_PREFIX):
                prepared.instance_type = prepared.volume_size_in_gb = None  # the service sizes built-ins
        if isinstance(prepared, Rule):
            if prepared.actions is not None and not self.job.name:
                self.problems.add(f"rule {rule.name!r} has actions, which need the request's TrainingJobName")
            prepared.prepare_actions(self.job.name or "")  # on the copy: the caller's rule stays as it was
        source = prepared.rule_parameters.get("source_s3_uri")
        if source is not None and not is_s3_uri(source):
            try:
                path = local_source_path(str(source))
            except ValueError as err:
                self.problems.add(f"rule {rule.name!r}: {err}")
                return prepared
            if path is None:
                self.problems.add(f"rule {rule.name!r}: source {source!r} is neither an s3:// URI nor a local file")
            else:
                if not os.path.isfile(path):
                    self.problems.add(f"rule {rule.name!r}: source file {path!r} does not exist (or is not a "
                                      "file); give the path of the .py file that defines the rule")
                self.uploads.append((prepared, path))
        return prepared


@dataclass
class _Decisions:
    """What goes into the request: the outcome of :func:`_decide`."""

    hook: DebuggerHookConfig | bool | None
    debugger_rules: list[Rule]  # as given, for warnings
    prepared_debugger_rules: list[Rule]
    collections: list[CollectionConfig]
    profiler_request: dict[str, Any]
    prepared_profiler_rules: list[ProfilerRule] = field(default_factory=list)
    tags: list[dict[str, str]] | None = None  # the request's new Tags; None: leave them as they are


def check_apply_arguments(problems: Problems, *, debugger_hook_config: Any, rules: Any, tensorboard_output_config: Any,
                     profiler_config: Any, disable_profiler: Any, region: Any, framework: Any,
                     framework_version: Any, auto_stop_opt_in_tag: Any = None) -> None:
    if not isinstance(region, str) or not region:
        problems.add(f"region must be an AWS region name such as 'us-west-2', got {region!r}")
    if debugger_hook_config is not None and not isinstance(debugger_hook_config, (bool, DebuggerHookConfig)):
        problems.add(f"debugger_hook_config must be a DebuggerHookConfig, True or False, got {debugger_hook_config!r}")
    if rules is not None and (isinstance(rules, (str, bytes, Mapping, RuleBase)) or not isinstance(rules, Sequence)):
        problems.add(f"rules must be a list of Rule/ProfilerRule, got {type(rules).__name__}; wrap it: rules=[...]")
    if tensorboard_output_config is not None and not isinstance(tensorboard_output_config, TensorBoardOutputConfig):
        problems.add(f"tensorboard_output_config must be a TensorBoardOutputConfig, got {tensorboard_output_config!r}")
    if profiler_config is not None and not isinstance(profiler_config, ProfilerConfig):
        problems.add(f"profiler_config must be a ProfilerConfig, got {profiler_config!r}")
    if disable_profiler is not None and not isinstance(disable_profiler, bool):
        problems.add(f"disable_profiler must be True or False, got {disable_profiler!r}")
    if framework is not None and not isinstance(framework, str):
        problems.add(f"framework must be a name such as 'pytorch', got {framework!r}")
    if framework_version is not None and not isinstance(framework_version, str):
        problems.add(f"framework_version must be a version string such as '2.1.0', got {framework_version!r}")
    if auto_stop_opt_in_tag is not None and (not isinstance(auto_stop_opt_in_tag, str)
                                             or not _TAG_KEY.fullmatch(auto_stop_opt_in_tag)):
        problems.add(f"auto_stop_opt_in_tag must be a tag key (1-128 letters, digits, spaces or _.:/=+-@, not "
                     f"starting with aws:) such as 'sdk-ext:auto-stop', the auto-stop stack's opt_in_tag; got "
                     f"{auto_stop_opt_in_tag!r}")


def _split_rules(problems: Problems, rules: Sequence[Any]) -> tuple[list[Rule], list[ProfilerRule]]:
    debugger_rules: list[Rule] = []
    profiler_rules: list[ProfilerRule] = []
    for i, rule in enumerate(rules):
        if isinstance(rule, Rule):
            debugger_rules.append(rule)
        elif isinstance(rule, ProfilerRule):
            profiler_rules.append(rule)
        else:
            problems.add(f"Rules list can only contain sagemaker.debugger.Rule and sagemaker.debugger.ProfilerRule: "
                         f"rules[{i}] is a {type(rule).__name__} ({rule!r}); give sdk_ext.debugger Rule and "
                         "ProfilerRule objects, e.g. Rule.sagemaker(rule_configs.vanishing_gradient())")
    return debugger_rules, profiler_rules


def _unique(collections: Sequence[CollectionConfig]) -> list[CollectionConfig]:
    """First-seen order; equal (name, parameters) collapse, like the SDK's set but deterministic."""
    seen: list[CollectionConfig] = []
    for collection in collections:
        if not any(collection == other for other in seen):
            seen.append(collection)
    return seen


def _existing_rule_names(request: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for key in ("DebugRuleConfigurations", "ProfilerRuleConfigurations"):
        names.update(r.get("RuleConfigurationName") for r in request.get(key) or [])
    return names


def _plan_hook(plan: JobPlan, request: Mapping[str, Any], hook_arg: DebuggerHookConfig | bool | None,
               debugger_rules: list[Rule]) -> DebuggerHookConfig | bool | None:
    """The hook to send (a DebuggerHookConfig), or False/None for none."""
    hook: DebuggerHookConfig | bool | None = hook_arg
    if hook is None and request.get("DebugHookConfig"):
        try:
            hook = DebuggerHookConfig.from_request_dict(request["DebugHookConfig"])
        except DebuggerConfigError as err:
            plan.problems.add_all([f"request DebugHookConfig: {p}" for p in err.problems])
            return None
    if not region_supports_debugger(plan.region):
        if isinstance(hook, DebuggerHookConfig):
            plan.problems.add(f"Current region does not support debugger but debugger hook config is set! Region "
                              f"{plan.region!r} does not support SageMaker Debugger; pass "
                              "debugger_hook_config=False or run in a supported region")
        elif debugger_rules:
            plan.problems.add(f"region {plan.region!r} does not support SageMaker Debugger, so the debugger "
                              f"rules {[r.name for r in debugger_rules]} cannot run there")
        return False
    if hook is False:
        return False
    if hook is None or hook is True or (isinstance(hook, DebuggerHookConfig) and not hook.s3_output_path):
        path = plan.output_path("the debugger hook's S3 output path")
        base = hook if isinstance(hook, DebuggerHookConfig) else DebuggerHookConfig()
        hook = copy.copy(base)
        hook.s3_output_path = path
    return hook


def _profiler_off_reasons(plan: JobPlan, disable_profiler: bool | None) -> list[str]:
    return [why for why, applies in (
        ("disable_profiler=True", bool(disable_profiler)),
        (f"region {plan.region!r} does not support the profiler", not region_supports_profiler(plan.region)),
        (f"instance type {plan.job.instance_types} (Trainium) runs without the profiler",
         any(instance_type_disables_profiler(t) for t in plan.job.instance_types)),
    ) if applies]


def _plan_profiler(plan: JobPlan, request: Mapping[str, Any], profiler_config: ProfilerConfig | None,
                   disable_profiler: bool | None, rules: Sequence[Any] | None,
                   profiler_rules: list[ProfilerRule]) -> tuple[dict[str, Any], list[ProfilerRule]]:
    """(ProfilerConfig request dict, profiler rules to send)."""
    reasons = _profiler_off_reasons(plan, disable_profiler)
    existing = request.get("ProfilerConfig") if profiler_config is None else None
    if reasons:
        off = "; ".join(reasons)
        if profiler_config is not None and not profiler_config.disable_profiler:
            sdk = "profiler_config.disable_profiler cannot be False when disable_profiler is True. " \
                if disable_profiler else ""
            plan.problems.add(f"{sdk}profiler_config enables the profiler, but it is off ({off}); "
                              "pass ProfilerConfig(disable_profiler=True) or no profiler_config")
        if profiler_rules:
            sdk = "ProfilerRule cannot be set when disable_profiler is True. " if disable_profiler else ""
            plan.problems.add(f"{sdk}profiler rules {[r.name for r in profiler_rules]} are set, but the profiler is "
                              f"off ({off}); remove them")
        return (profiler_config or ProfilerConfig(disable_profiler=True))._to_request_dict(), []
    config = profiler_config
    if config is None and not existing:
        config = ProfilerConfig()
    if rules is None or (rules and not profiler_rules):
        profiler_rules = []
        if config is not None and config.profile_params is not None:
            params = config.profile_params
            profiler_rules.append(get_default_profiler_processing_job(
                instance_type=params.instanceType, volume_size_in_gb=params.volumeSizeInGB, now=plan.now))
    if config is None:  # the request's own ProfilerConfig stays
        kept = dict(existing or {})
        if not kept.get("DisableProfiler") and not kept.get("S3OutputPath"):
            kept["S3OutputPath"] = plan.output_path("the profiler's S3 output path")
        return kept, profiler_rules
    if not config.s3_output_path and not config.disable_profiler:
        config = copy.copy(config)
        config.s3_output_path = plan.output_path("the profiler's S3 output path")
    return config._to_request_dict(), profiler_rules


def _decide(plan: JobPlan, request: Mapping[str, Any], *, debugger_hook_config: DebuggerHookConfig | bool | None,
            rules: Sequence[Any] | None, profiler_config: ProfilerConfig | None,
            disable_profiler: bool | None) -> _Decisions:
    """Everything that goes into the request; problems are collected in ``plan.problems``, not raised."""
    debugger_rules, profiler_rules = _split_rules(plan.problems, rules or [])
    hook = _plan_hook(plan, request, debugger_hook_config, debugger_rules)
    prepared_debug = [plan.prepare_rule(r) for r in debugger_rules]
    hook_collections = list(hook.collection_configs or []) if isinstance(hook, DebuggerHookConfig) else []
    collections = _unique([c for r in debugger_rules for c in r.collection_configs] + hook_collections)
    profiler_request, profiler_rules = _plan_profiler(plan, request, profiler_config, disable_profiler, rules,
                                                      profiler_rules)
    prepared_profiler = [plan.prepare_rule(r) for r in profiler_rules]
    clashes = _existing_rule_names(request) & {r.name for r in [*prepared_debug, *prepared_profiler]}
    if rules is not None and clashes:
        plan.problems.add(f"the request already has rules named {sorted(clashes)} (was Debugger applied twice?); "
                          "rule names must be unique")
    return _Decisions(hook, debugger_rules, prepared_debug, collections, profiler_request, prepared_profiler)


def _plan_tags(plan: JobPlan, request: Mapping[str, Any], key: str | None) -> list[dict[str, str]] | None:
    """The request's Tags with ``key``=true added (None when there is no key); conflicts are problems."""
    if key is None:
        return None
    existing = request.get("Tags")
    if existing is None:
        existing = []
    if not isinstance(existing, list) or not all(isinstance(t, Mapping) for t in existing):
        plan.problems.add(f"request Tags must be a list of {{'Key': ..., 'Value': ...}} dicts to add the auto-stop "
                          f"opt-in tag {key!r}, got {existing!r}")
        return None
    tags = [dict(t) for t in existing]
    values = [t.get("Value") for t in tags if t.get("Key") == key]
    if any(v != AUTO_STOP_OPT_IN_VALUE for v in values):
        plan.problems.add(f"request Tags already has {key!r} with the value {values[0]!r}; auto_stop_opt_in_tag "
                          f"sets it to {AUTO_STOP_OPT_IN_VALUE!r} (the job may be stopped by auto-stop): remove "
                          "that tag from the request or drop auto_stop_opt_in_tag")
        return None
    if not values:
        tags.append({"Key": key, "Value": AUTO_STOP_OPT_IN_VALUE})
    if len(tags) > _MAX_TAGS:
        plan.problems.add(f"adding the auto-stop opt-in tag {key!r} makes {len(tags)} tags; a training job has at "
                          f"most {_MAX_TAGS}: remove one from the request's Tags")
        return None
    return tags


def _framework_version(job: _Job, framework: str, given: str | None) -> tuple[int, ...] | None:
    """The framework version as numbers: ``given``, else read from a SageMaker framework image's tag."""
    text = given
    if text is None:
        repository, _, tag = job.training_image.rpartition("/")[2].partition(":")
        match = _IMAGE_TAG_VERSION.match(tag)
        text = match.group(1) if match and framework in repository else None
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return None


def _warn_about(plan: JobPlan, decisions: _Decisions, framework: str, framework_version: str | None,
                profiler_config: ProfilerConfig | None) -> None:
    """Warnings for settings the training job will not honour (as the v2 Estimator warns)."""
    if framework != "xgboost":
        for rule in decisions.debugger_rules:
            if rule.name in _XGBOOST_ONLY_RULES:
                logger.warning("rule %s is meant for XGBoost training jobs only", rule.name)
    ends = _FRAMEWORK_PROFILING_ENDS.get(framework)
    if ends is None or profiler_config is None or profiler_config.framework_profile_params is None:
        return
    version = _framework_version(plan.job, framework, framework_version)
    if version is not None and version >= ends:
        shown = ".".join(map(str, version))
        warnings.warn(f"Framework profiling is deprecated from {framework} version {shown}. No framework metrics "
                      f"will be collected: job {plan.job.name!r} runs {framework} {shown}, so "
                      "ProfilerConfig(framework_profile_params=...) has no effect; use profile_params=Profiler() "
                      "for SageMaker Profiler, or drop framework_profile_params", DeprecationWarning, stacklevel=3)


def _drop_hook_for_checkpoints(plan: JobPlan, decisions: _Decisions, framework: str) -> None:
    """A checkpointed multi-instance framework job runs without the hook (SageMaker does not support both)."""
    if framework in _CHECKPOINT_FRAMEWORKS and plan.job.checkpointed and isinstance(decisions.hook,
                                                                                     DebuggerHookConfig) \
            and plan.job.instance_count > 1:
        logger.warning("job %s: the Debugger hook does not support checkpointing in distributed training "
                       "(%d instances); the hook is turned off, rules still run", plan.job.name,
                       plan.job.instance_count)
        decisions.hook = False


def _upload_rule_sources(plan: JobPlan, uploader: RuleSourceUploader | None) -> None:
    sender = uploader or S3RuleSourceUploader(region=plan.region)
    for prepared, path in plan.uploads:
        prepared.rule_parameters["source_s3_uri"] = sender.upload(
            path, rule_name=prepared.name, default_prefix=plan.job.output_path)


def _build_request(request: Mapping[str, Any], plan: JobPlan, decisions: _Decisions, *, framework: str,
                   rules_given: bool, tensorboard_output_config: TensorBoardOutputConfig | None) -> dict[str, Any]:
    new = copy.deepcopy(dict(request))
    if decisions.tags is not None:
        new["Tags"] = decisions.tags  # in place when present: the key order stays the request's
    hook = decisions.hook
    if framework == "tensorflow" and plan.job.parameter_server:
        logger.warning("job %s: TensorFlow parameter-server training runs without the Debugger hook and "
                       "debugger rules", plan.job.name)
        hook = None
        new.pop("DebugRuleConfigurations", None)
    elif rules_given:
        debug_rules = [r.to_debugger_rule_config_dict() for r in decisions.prepared_debugger_rules]
        _set_list(new, "DebugRuleConfigurations", [*(request.get("DebugRuleConfigurations") or []), *debug_rules])
    if isinstance(hook, DebuggerHookConfig):
        new["DebugHookConfig"] = {**hook._to_request_dict(),
                                  "CollectionConfigurations": [c._to_request_dict() for c in decisions.collections]}
    else:
        new.pop("DebugHookConfig", None)
    if tensorboard_output_config is not None:
        new["TensorBoardOutputConfig"] = tensorboard_output_config._to_request_dict()
    profiler_request = decisions.profiler_request
    new["ProfilerConfig"] = profiler_request
    profiler_dicts = [r.to_profiler_rule_config_dict() for r in decisions.prepared_profiler_rules]
    if profiler_request.get("DisableProfiler"):
        new.pop("ProfilerRuleConfigurations", None)
    elif profiler_dicts or rules_given:
        _set_list(new, "ProfilerRuleConfigurations",
                  [*(request.get("ProfilerRuleConfigurations") or []), *profiler_dicts])
    # The SDK's key order, after everything else: the same JSON bytes as a v2 Estimator's request.
    for key in _SDK_KEY_ORDER:
        if key in new:
            new[key] = new.pop(key)
    return new


def apply_debugger(
    request: Mapping[str, Any],
    *,
    debugger_hook_config: DebuggerHookConfig | bool | None = None,
    rules: Sequence[RuleBase] | None = None,
    tensorboard_output_config: TensorBoardOutputConfig | None = None,
    profiler_config: ProfilerConfig | None = None,
    disable_profiler: bool | None = None,
    region: str,
    framework: str | None = None,
    framework_version: str | None = None,
    uploader: RuleSourceUploader | None = None,
    now: Callable[[], datetime] | None = None,
    auto_stop_opt_in_tag: str | None = None,
) -> dict[str, Any]:
    """Return a copy of a CreateTrainingJob ``request`` with SageMaker Debugger configured.

    Args:
        request: CreateTrainingJob parameters (boto3 form). Not modified.
        debugger_hook_config: The hook; True or None for the default one, False for none.
        rules: Debugger and profiler rules. ``[]`` (unlike None) also suppresses the detailed-profiler job.
        tensorboard_output_config: Where TensorBoard files go.
        profiler_config: Monitoring/profiling settings; a default one when None.
        disable_profiler: Turn monitoring and profiling off.
        region: The job's region (rule images and region support depend on it).
        framework: ``"pytorch"``, ``"tensorflow"``, ``"mxnet"``... for the framework-specific rules:
            a checkpointed multi-instance job drops the hook; TensorFlow parameter-server jobs drop
            the hook and debugger rules.
        framework_version: The framework's version, for the FrameworkProfile deprecation warning
            (PyTorch >= 2.0, TensorFlow >= 2.12); read from the training image's tag when not given.
        uploader: Uploads local rule sources; an S3RuleSourceUploader (boto3) by default.
        now: Clock for the detailed-profiler job's name.
        auto_stop_opt_in_tag: Tag the job ``{"Key": auto_stop_opt_in_tag, "Value": "true"}`` so that an
            auto-stop stack deployed with ``--context opt_in_tag=<the same key>`` may stop it (added to the
            request's Tags; a tag already there with that key and value "true" is kept as it is, one with
            another value is an error). None (the default): Tags are left as they are.

    Returns:
        A new request dict.

    Raises:
        DebuggerConfigError: every problem found, before anything is uploaded.
        StorageError: uploading a local rule source failed.
    """
    if not isinstance(request, Mapping):
        raise DebuggerConfigError([f"request must be a dict of CreateTrainingJob parameters, got {request!r}"],
                                  where="apply_debugger")
    problems = Problems("apply_debugger")
    check_apply_arguments(problems, debugger_hook_config=debugger_hook_config, rules=rules, region=region,
                     tensorboard_output_config=tensorboard_output_config, profiler_config=profiler_config,
                     disable_profiler=disable_profiler, framework=framework, framework_version=framework_version,
                     auto_stop_opt_in_tag=auto_stop_opt_in_tag)
    problems.raise_if_any()
    plan = JobPlan(request, region, problems, now)
    decisions = _decide(plan, request, debugger_hook_config=debugger_hook_config, rules=rules,
                        profiler_config=profiler_config, disable_profiler=disable_profiler)
    decisions.tags = _plan_tags(plan, request, auto_stop_opt_in_tag)
    problems.raise_if_any()
    fw = (framework or "").lower()
    _drop_hook_for_checkpoints(plan, decisions, fw)
    _warn_about(plan, decisions, fw, framework_version, profiler_config)
    _upload_rule_sources(plan, uploader)
    return _build_request(request, plan, decisions, framework=fw, rules_given=rules is not None,
                          tensorboard_output_config=tensorboard_output_config)


def _set_list(request: dict[str, Any], key: str, items: list[dict[str, Any]]) -> None:
    """Set a rule list; an empty one is left out, as the API form omits empty lists."""
    if items:
        request[key] = copy.deepcopy(items)
    else:
        request.pop(key, None)
