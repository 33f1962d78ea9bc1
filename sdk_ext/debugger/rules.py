"""Rule and ProfilerRule: the analyses SageMaker runs beside a training job.

Request form (one element of ``DebugRuleConfigurations`` / ``ProfilerRuleConfigurations``), keys in
this order, each optional key present only when its value is truthy::

    {"RuleConfigurationName": "VanishingGradient",
     "RuleEvaluatorImage": "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest",
     "InstanceType": "ml.t3.medium", "VolumeSizeInGB": 30, "LocalPath": "/opt/ml/processing/output/rule",
     "S3OutputPath": "s3://b/rule-out", "RuleParameters": {"rule_to_invoke": "VanishingGradient"}}

Built-in rules carry the placeholder image ``DEFAULT_RULE_EVALUATOR_IMAGE`` until apply_debugger
picks the regional one. Profiler rule parameters go out as ``str(value)``; debugger rule parameters
must already be strings. apply_debugger never changes the rules it is given (it prepares copies);
``prepare_actions``, which a v2 Estimator calls on the rule itself, sets ``action_json`` in place
as v2 does.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from importlib import resources
from typing import Any, cast

import smdebug_rulesconfig as rule_configs
from smdebug_rulesconfig.profiler_rules.rules import ProfilerRuleBase

from sdk_ext.debugger.collection import CollectionConfig
from sdk_ext.debugger.errors import (
    Problems,
    check_name,
    check_optional_str,
    check_s3_uri,
    check_str_mapping,
    is_s3_uri,
)
from sdk_ext.debugger.hook_config import check_collections
from sdk_ext.debugger.images import DETAILED_PROFILER_RULE_PREFIX
from sdk_ext.debugger.profiler_constants import (
    DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE,
    DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE,
)
from sdk_ext.debugger.sdk_ext_rules import SDK_EXT_RULE_NAMES

DEFAULT_RULE_EVALUATOR_IMAGE = "DEFAULT_RULE_EVALUATOR_IMAGE"
DETAILED_PROFILER_INSTANCE_TYPE = DETAIL_PROF_PROCESSING_DEFAULT_INSTANCE_TYPE
DETAILED_PROFILER_VOLUME_SIZE_IN_GB = DETAIL_PROF_PROCESSING_DEFAULT_VOLUME_SIZE

_RULE_FIELDS = ("name", "image_uri", "instance_type", "container_local_output_path", "s3_output_path",
                "volume_size_in_gb", "rule_parameters")


@functools.lru_cache(maxsize=1)
def builtin_rule_names() -> tuple[str, ...]:
    """Names of the built-in debugger rules, as smdebug-rulesconfig ships them."""
    source = resources.files("smdebug_rulesconfig.debugger_rules") / "rule_config_jsons/ruleConfigs.json"
    return tuple(json.loads(source.read_text(encoding="utf-8")))


class DetailedProfilerProcessingJobConfig:
    """The built-in job that post-processes detailed profiling data (a ProfilerRule base_config)."""

    def __init__(self) -> None:
        self.rule_name = DETAILED_PROFILER_RULE_PREFIX
        self.rule_parameters: dict[str, Any] = {"rule_to_invoke": "DetailedProfilerProcessing"}


def _check_other_trials(problems: Problems, value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        problems.add(f"other_trials_s3_input_paths must be a list of S3 URIs, got {value!r}")
        return []
    paths = list(value)
    for i, path in enumerate(paths):
        check_s3_uri(problems, f"other_trials_s3_input_paths[{i}]", path, optional=False)
    return paths


def _check_source(problems: Problems, source: object, rule_to_invoke: object) -> None:
    check_optional_str(problems, "source", source)
    check_optional_str(problems, "rule_to_invoke", rule_to_invoke)
    if bool(source) != bool(rule_to_invoke):
        given, missing = ("source", "rule_to_invoke") if source else ("rule_to_invoke", "source")
        problems.add(
            "If you provide a source, you must also provide a rule to invoke (and vice versa). "
            f"Here {given} is set but {missing} is not: a custom rule from a source file needs both the "
            "file (source=S3 URI or local path) and the name of the rule class in it (rule_to_invoke)"
        )


def _check_volume(problems: Problems, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.add(f"volume_size_in_gb must be a whole number of GB >= 0, got {value!r}")


def _check_custom(
    problems: Problems,
    name: object,
    image_uri: object,
    instance_type: object,
    volume_size_in_gb: object,
    source: object,
    rule_to_invoke: object,
    container_local_output_path: object,
    s3_output_path: object,
) -> None:
    """The checks of the arguments that Rule.custom and ProfilerRule.custom share, in their order."""
    check_name(problems, "name", name)
    check_name(problems, "image_uri", image_uri)
    check_name(problems, "instance_type", instance_type)
    _check_volume(problems, volume_size_in_gb, optional=False)
    _check_source(problems, source, rule_to_invoke)
    check_optional_str(problems, "container_local_output_path", container_local_output_path)
    check_s3_uri(problems, "s3_output_path", s3_output_path)


def _check_actions(problems: Problems, actions: object) -> None:
    if actions is not None and not rule_configs.is_valid_action_object(actions):
        problems.add(
            "`actions` must be of type `Action` or `ActionList`! "
            f"Got {type(actions).__name__} {actions!r}: pass an action (rule_configs.StopTraining(), "
            "rule_configs.Email(...), rule_configs.SMS(...)) or a rule_configs.ActionList of them"
        )


class RuleBase:
    """The fields every rule has. Build rules with the ``sagemaker``/``custom`` classmethods."""

    def __init__(self, name: str, image_uri: str, instance_type: str | None,
                 container_local_output_path: str | None, s3_output_path: str | None,
                 volume_size_in_gb: int | None, rule_parameters: Mapping[str, Any] | None) -> None:
        self.name = name
        self.image_uri = image_uri
        self.instance_type = instance_type
        self.container_local_output_path = container_local_output_path
        self.s3_output_path = s3_output_path
        self.volume_size_in_gb = volume_size_in_gb
        self.rule_parameters: dict[str, Any] = dict(rule_parameters or {})

    def _request_dict(self, parameters: dict[str, Any]) -> dict[str, Any]:
        request: dict[str, Any] = {"RuleConfigurationName": self.name, "RuleEvaluatorImage": self.image_uri}
        for key, value in (("InstanceType", self.instance_type), ("VolumeSizeInGB", self.volume_size_in_gb),
                           ("LocalPath", self.container_local_output_path),
                           ("S3OutputPath", self.s3_output_path), ("RuleParameters", parameters)):
            if value:  # the API form omits every empty field (0, "", {} included)
                request[key] = value
        return request

    def copy_with(self, **changes: Any) -> Any:
        """A copy with some fields changed; its parameters are a new dict, so the original never changes."""
        clone = copy.copy(self)
        clone.rule_parameters = dict(self.rule_parameters)
        for key, value in changes.items():
            setattr(clone, key, value)
        return clone

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in _RULE_FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RuleBase) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # rules are mutable values, like the SDK's

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in _RULE_FIELDS)
        return f"{type(self).__name__}({fields})"


class Rule(RuleBase):
    """A debugger rule: analyses the tensors the hook saves."""

    def __init__(self, name: str, image_uri: str, instance_type: str | None,
                 container_local_output_path: str | None, s3_output_path: str | None,
                 volume_size_in_gb: int | None, rule_parameters: Mapping[str, Any] | None,
                 collections_to_save: Iterable[CollectionConfig] | None, actions: Any = None) -> None:
        super().__init__(name, image_uri, instance_type, container_local_output_path, s3_output_path,
                         volume_size_in_gb, rule_parameters)
        self.collection_configs: list[CollectionConfig] = list(collections_to_save or [])
        self.actions = actions

    @classmethod
    def sagemaker(cls, base_config: Mapping[str, Any], name: str | None = None,
                  container_local_output_path: str | None = None, s3_output_path: str | None = None,
                  other_trials_s3_input_paths: Sequence[str] | None = None,
                  rule_parameters: Mapping[str, str] | None = None,
                  collections_to_save: Iterable[CollectionConfig] | None = None,
                  actions: Any = None) -> Rule:
        """A built-in rule, from a ``rule_configs.<rule>()`` base config.

        ``rule_parameters`` override the rule's defaults; ``collections_to_save`` replaces the
        collections the rule asks the hook to save.

        Raises:
            DebuggerConfigError: listing every invalid argument (unknown rule, non-string
                parameter, non-S3 path, ``rule_to_invoke`` given, invalid actions...).
        """
        problems = Problems("Rule.sagemaker")
        rule_name, defaults, base_collections = _parse_builtin_base_config(problems, base_config)
        if name is not None:
            check_name(problems, "name", name)
        check_optional_str(problems, "container_local_output_path", container_local_output_path)
        check_s3_uri(problems, "s3_output_path", s3_output_path)
        others = _check_other_trials(problems, other_trials_s3_input_paths)
        user_params = check_str_mapping(problems, "rule_parameters", rule_parameters, string_values=True)
        if user_params is not None and "rule_to_invoke" in user_params:
            problems.add(
                "You cannot provide a 'rule_to_invoke' for SageMaker rules. Either remove the rule_to_invoke "
                f"or use a custom rule. rule_parameters sets rule_to_invoke={user_params['rule_to_invoke']!r}, "
                "but a built-in rule always invokes itself; remove that key, or use "
                "Rule.custom(source=..., rule_to_invoke=...)"
            )
        collections = check_collections(problems, "collections_to_save", collections_to_save)
        _check_actions(problems, actions)
        problems.raise_if_any()

        parameters: dict[str, Any] = {f"other_trial_{i}": path for i, path in enumerate(others)}
        parameters.update(defaults)
        parameters.update(user_params or {})
        image = base_config.get("DebugRuleConfiguration", {}).get("RuleEvaluatorImage")  # sdk_ext's own rules
        return cls(name=name or cast(str, rule_name), image_uri=image or DEFAULT_RULE_EVALUATOR_IMAGE, instance_type=None,
                   container_local_output_path=container_local_output_path, s3_output_path=s3_output_path,
                   volume_size_in_gb=None, rule_parameters=parameters,
                   collections_to_save=collections or base_collections, actions=actions)

    @classmethod
    def custom(cls, name: str, image_uri: str, instance_type: str, volume_size_in_gb: int,
               source: str | None = None, rule_to_invoke: str | None = None,
               container_local_output_path: str | None = None, s3_output_path: str | None = None,
               other_trials_s3_input_paths: Sequence[str] | None = None,
               rule_parameters: Mapping[str, str] | None = None,
               collections_to_save: Iterable[CollectionConfig] | None = None,
               actions: Any = None) -> Rule:
        """A rule run by your own image, or by the rule image from your own source file.

        ``source`` is an S3 URI or a local file; apply_debugger uploads a local one.

        Raises:
            DebuggerConfigError: listing every invalid argument.
        """
        problems = Problems("Rule.custom")
        _check_custom(problems, name, image_uri, instance_type, volume_size_in_gb, source, rule_to_invoke,
                      container_local_output_path, s3_output_path)
        others = _check_other_trials(problems, other_trials_s3_input_paths)
        user_params = check_str_mapping(problems, "rule_parameters", rule_parameters, string_values=True)
        collections = check_collections(problems, "collections_to_save", collections_to_save)
        _check_actions(problems, actions)
        problems.raise_if_any()

        parameters: dict[str, Any] = {f"other_trial_{i}": path for i, path in enumerate(others)}
        parameters.update({k: v for k, v in (("source_s3_uri", source), ("rule_to_invoke", rule_to_invoke)) if v})
        parameters.update(user_params or {})
        return cls(name=name, image_uri=image_uri, instance_type=instance_type,
                   container_local_output_path=container_local_output_path, s3_output_path=s3_output_path,
                   volume_size_in_gb=volume_size_in_gb, rule_parameters=parameters,
                   collections_to_save=collections, actions=actions)

    def prepare_actions(self, training_job_name: str) -> Rule:
        """Set this rule's ``action_json`` parameter from its actions, as v2 does before a job starts.

        A StopTraining action without a prefix stops ``training_job_name``. Without actions, a
        user-supplied ``action_json`` is removed (SageMaker owns that parameter). The actions given
        to the rule are not changed (the prefix goes into a copy). Returns this rule.
        """
        if self.actions is None:
            self.rule_parameters.pop("action_json", None)
            return self
        actions = copy.deepcopy(self.actions)
        # ActionList and StopTraining take the job name as default prefix; Email/SMS have none to set.
        if hasattr(actions, "update_training_job_prefix_if_not_specified"):
            actions.update_training_job_prefix_if_not_specified(training_job_name)
        self.actions = actions
        self.rule_parameters["action_json"] = actions.serialize()
        return self

    def to_debugger_rule_config_dict(self) -> dict[str, Any]:
        return self._request_dict(dict(self.rule_parameters))


def _parse_builtin_base_config(
    problems: Problems, base_config: object
) -> tuple[str | None, dict[str, Any], list[CollectionConfig]]:
    """(rule name, default parameters, collections) of a ``rule_configs.<rule>()`` result (or of an
    sdk_ext rule's base config, :mod:`sdk_ext.debugger.sdk_ext_rules`)."""
    known = builtin_rule_names() + SDK_EXT_RULE_NAMES
    if callable(base_config) and not isinstance(base_config, Mapping):
        fn = getattr(base_config, "__name__", repr(base_config))
        problems.add(f"base_config is the function {fn!r}, not its result; call it: rule_configs.{fn}()")
        return None, {}, []
    if isinstance(base_config, ProfilerRuleBase):
        problems.add(f"base_config {type(base_config).__name__}() is a profiler rule; use ProfilerRule.sagemaker")
        return None, {}, []
    rule = base_config.get("DebugRuleConfiguration") if isinstance(base_config, Mapping) else None
    name = rule.get("RuleConfigurationName") if isinstance(rule, Mapping) else None
    if name not in known:
        what = f"unknown built-in rule {name!r}" if name else f"base_config {base_config!r} is not a built-in rule"
        problems.add(f"{what}; pass rule_configs.<rule>() for one of: {', '.join(sorted(known))}, "
                     "or use Rule.custom for your own rule")
        return None, {}, []
    base, rule = cast(Mapping[str, Any], base_config), cast(Mapping[str, Any], rule)  # checked above
    defaults = dict(rule.get("RuleParameters") or {})
    collections = [CollectionConfig(c.get("CollectionName"), c.get("CollectionParameters") or {})
                   for c in base.get("CollectionConfigurations") or []]
    return name, defaults, collections


class ProfilerRule(RuleBase):
    """A profiler rule: analyses system and framework metrics."""

    @classmethod
    def sagemaker(cls, base_config: Any, name: str | None = None,
                  container_local_output_path: str | None = None, s3_output_path: str | None = None,
                  instance_type: str | None = None, volume_size_in_gb: int | None = None) -> ProfilerRule:
        """A built-in profiler rule, from a ``rule_configs.<ProfilerRule>()`` instance.

        Raises:
            DebuggerConfigError: listing every invalid argument.
        """
        problems = Problems("ProfilerRule.sagemaker")
        if isinstance(base_config, type) and issubclass(base_config, ProfilerRuleBase):
            problems.add(f"base_config is the class {base_config.__name__}, not an instance; "
                         f"write rule_configs.{base_config.__name__}()")
        elif not isinstance(base_config, (ProfilerRuleBase, DetailedProfilerProcessingJobConfig)):
            hint = "; debugger rules go to Rule.sagemaker" if isinstance(base_config, Mapping) else ""
            problems.add(f"base_config must be a built-in profiler rule such as rule_configs.ProfilerReport(), "
                         f"got {type(base_config).__name__} {base_config!r}{hint}")
        if name is not None:
            check_name(problems, "name", name)
        check_optional_str(problems, "container_local_output_path", container_local_output_path)
        check_s3_uri(problems, "s3_output_path", s3_output_path)
        check_optional_str(problems, "instance_type", instance_type)
        _check_volume(problems, volume_size_in_gb, optional=True)
        problems.raise_if_any()

        rule_name = name or base_config.rule_name
        if rule_name.startswith(DETAILED_PROFILER_RULE_PREFIX):
            instance_type = instance_type or DETAILED_PROFILER_INSTANCE_TYPE
            volume_size_in_gb = volume_size_in_gb or DETAILED_PROFILER_VOLUME_SIZE_IN_GB
        return cls(name=rule_name, image_uri=DEFAULT_RULE_EVALUATOR_IMAGE, instance_type=instance_type,
                   container_local_output_path=container_local_output_path, s3_output_path=s3_output_path,
                   volume_size_in_gb=volume_size_in_gb, rule_parameters=base_config.rule_parameters)

    @classmethod
    def custom(cls, name: str, image_uri: str, instance_type: str, volume_size_in_gb: int,
               source: str | None = None, rule_to_invoke: str | None = None,
               container_local_output_path: str | None = None, s3_output_path: str | None = None,
               rule_parameters: Mapping[str, Any] | None = None) -> ProfilerRule:
        """A profiler rule run by your own image or source file. Parameter values are sent as str().

        Raises:
            DebuggerConfigError: listing every invalid argument.
        """
        problems = Problems("ProfilerRule.custom")
        _check_custom(problems, name, image_uri, instance_type, volume_size_in_gb, source, rule_to_invoke,
                      container_local_output_path, s3_output_path)
        user_params = check_str_mapping(problems, "rule_parameters", rule_parameters, string_values=False)
        problems.raise_if_any()

        parameters = {k: v for k, v in (("source_s3_uri", source), ("rule_to_invoke", rule_to_invoke)) if v}
        parameters.update(user_params or {})
        return cls(name=name, image_uri=image_uri, instance_type=instance_type,
                   container_local_output_path=container_local_output_path, s3_output_path=s3_output_path,
                   volume_size_in_gb=volume_size_in_gb, rule_parameters=parameters)

    def to_profiler_rule_config_dict(self) -> dict[str, Any]:
        return self._request_dict({k: str(v) for k, v in self.rule_parameters.items()})


def rule_timestamp(moment: datetime) -> str:
    """``YYYY-MM-DD-HH-MM-SS-mmm`` in UTC, the suffix SageMaker job-name helpers use."""
    utc = moment.astimezone(timezone.utc) if moment.tzinfo else moment
    return utc.strftime("%Y-%m-%d-%H-%M-%S-") + f"{utc.microsecond // 1000:03d}"


def get_default_profiler_processing_job(instance_type: str | None = None, volume_size_in_gb: int | None = None,
                                        *, now: Callable[[], datetime] | None = None) -> ProfilerRule:
    """The detailed-profiler processing job, named ``DetailedProfilerProcessingJobConfig-<timestamp>``."""
    moment = (now or (lambda: datetime.now(timezone.utc)))()
    return ProfilerRule.sagemaker(DetailedProfilerProcessingJobConfig(),
                                  name=f"{DETAILED_PROFILER_RULE_PREFIX}-{rule_timestamp(moment)}",
                                  instance_type=instance_type, volume_size_in_gb=volume_size_in_gb)


def is_local_source(rule: RuleBase) -> bool:
    """True when the rule's ``source_s3_uri`` is a local file that must be uploaded first."""
    source = rule.rule_parameters.get("source_s3_uri")
    return source is not None and not is_s3_uri(source)
