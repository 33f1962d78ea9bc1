"""Turns the oracle's declarative inputs (shared/fixtures/sdk/README.md) into sdk_ext.debugger objects.

Kept apart from the test module so unit tests can build the same objects from the same specs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smdebug_rulesconfig.profiler_rules import rules as profiler_rule_classes

from sdk_ext import debugger as dbg
from sdk_ext.debugger import rule_configs

LOCAL_RULE_FILE = "<LOCAL_RULE_FILE>"


class Specs:
    """Builders bound to one local rule file (the oracle's ``<LOCAL_RULE_FILE>``)."""

    def __init__(self, local_rule_file: Path) -> None:
        self.local_rule_file = local_rule_file

    def _path(self, value: Any) -> Any:
        return str(self.local_rule_file) if value == LOCAL_RULE_FILE else value

    @staticmethod
    def collection(spec: dict[str, Any]) -> dbg.CollectionConfig:
        if "parameters" in spec:
            return dbg.CollectionConfig(spec["name"], spec["parameters"])
        return dbg.CollectionConfig(spec["name"])

    def hook(self, spec: Any) -> Any:
        if not isinstance(spec, dict):
            return spec  # True / False / None, passed as is
        kwargs = {k: v for k, v in spec.items() if k != "collection_configs"}
        if "collection_configs" in spec:
            kwargs["collection_configs"] = [self.collection(c) for c in spec["collection_configs"]]
        return dbg.DebuggerHookConfig(**kwargs)

    @staticmethod
    def tensorboard(spec: dict[str, Any]) -> dbg.TensorBoardOutputConfig:
        return dbg.TensorBoardOutputConfig(**spec)

    @staticmethod
    def action(spec: Any) -> Any:
        if spec == "INVALID_STRING":
            return "stop"
        if isinstance(spec, list):
            return rule_configs.ActionList(*(Specs.action(s) for s in spec))
        kind, kwargs = spec["type"], {k: v for k, v in spec.items() if k != "type"}
        return {"StopTraining": rule_configs.StopTraining, "Email": rule_configs.Email,
                "SMS": rule_configs.SMS}[kind](**kwargs)

    @staticmethod
    def profiler_base(spec: dict[str, Any]) -> Any:
        cls = getattr(rule_configs, spec["class"], None) or getattr(profiler_rule_classes, spec["class"])
        return cls(**spec.get("kwargs", {}))

    def rule(self, spec: dict[str, Any]) -> Any:
        kind = spec["kind"]
        if kind == "NOT_A_RULE":
            return {"not": "a rule"}
        kwargs = {k: v for k, v in spec.items() if k not in ("kind", "base_config")}
        if "source" in kwargs:
            kwargs["source"] = self._path(kwargs["source"])
        if "collections_to_save" in kwargs:
            kwargs["collections_to_save"] = [self.collection(c) for c in kwargs["collections_to_save"]]
        if "actions" in kwargs:
            kwargs["actions"] = self.action(kwargs["actions"])
        if kind == "Rule.sagemaker":
            return dbg.Rule.sagemaker(getattr(rule_configs, spec["base_config"])(), **kwargs)
        if kind == "Rule.custom":
            return dbg.Rule.custom(**kwargs)
        if kind == "ProfilerRule.sagemaker":
            return dbg.ProfilerRule.sagemaker(self.profiler_base(spec["base_config"]), **kwargs)
        if kind == "ProfilerRule.custom":
            return dbg.ProfilerRule.custom(**kwargs)
        raise AssertionError(f"unknown rule kind {kind!r} in the oracle")

    @staticmethod
    def metrics_config(spec: dict[str, Any]) -> Any:
        kwargs = dict(spec.get("kwargs", {}))
        if "python_profiler" in kwargs:
            kwargs["python_profiler"] = dbg.PythonProfiler[kwargs["python_profiler"]]
        if "cprofile_timer" in kwargs:
            kwargs["cprofile_timer"] = dbg.cProfileTimer[kwargs["cprofile_timer"]]
        return getattr(dbg, spec["class"])(**kwargs)

    def framework_profile(self, spec: dict[str, Any]) -> dbg.FrameworkProfile:
        kwargs = {k: (self.metrics_config(v) if k.endswith("_profiling_config") else v) for k, v in spec.items()}
        return dbg.FrameworkProfile(**kwargs)

    def profiler_config(self, spec: dict[str, Any]) -> dbg.ProfilerConfig:
        kwargs = dict(spec)
        if "framework_profile_params" in kwargs:
            kwargs["framework_profile_params"] = self.framework_profile(kwargs["framework_profile_params"])
        if "profile_params" in kwargs:
            kwargs["profile_params"] = dbg.Profiler(**kwargs["profile_params"])
        return dbg.ProfilerConfig(**kwargs)

    def build_unit(self, build: str, spec: dict[str, Any]) -> Any:
        return {
            "CollectionConfig": self.collection,
            "DebuggerHookConfig": self.hook,
            "TensorBoardOutputConfig": self.tensorboard,
            "Rule": self.rule,
            "ProfilerRule": self.rule,
            "ProfilerConfig": self.profiler_config,
            "FrameworkProfile": self.framework_profile,
            "MetricsConfig": self.metrics_config,
            "rule_configs": lambda s: getattr(rule_configs, s["function"])(),
            "profiler_rule_configs": self.profiler_base,
            "image_uri": lambda s: dbg.get_rule_container_image_uri(s["name"], s["region"]),
        }[build](spec)
