"""From SageMaker's RuleParameters to a rule object (docs/RULES.md#as-sagemaker-sends-them).

``RuleParameters`` is one flat ``map<string,string>``. Some keys are for the evaluator, not the rule:
``rule_to_invoke``, ``source_s3_uri``, ``other_trial_<i>``, ``start_step``, ``end_step``,
``action_json``, ``invoke_timeout_secs`` (sdk_ext's: :mod:`sdk_ext.rules.time_limit`). :func:`split_parameters` takes those out; :func:`build_rule` maps the rest onto
the rule's constructor by parameter name:

* ``base_trial`` is passed first; a parameter named ``other_trials`` gets the other trials and
  one named ``action_str`` gets ``action_json``;
* a constructor parameter without a default that nothing supplies is an error naming it;
* a key that matches no constructor parameter is an error for built-in rules (a misspelt
  parameter would otherwise be silently ignored) and a logged warning for custom rules (SageMaker
  ignores such keys, and a custom rule that runs there must run here).

:func:`load_rule_class` imports a custom rule from a ``.py`` file. Code written for SageMaker
imports ``smdebug``; when smdebug is not installed, :func:`smdebug_aliases` lets such a file import
the equivalent sdk_ext modules instead.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import logging
import re
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sdk_ext.exceptions import ConfigError
from sdk_ext.rules.builtin import BuiltinRule
from sdk_ext.rules.rule import Rule
from sdk_ext.rules.time_limit import DEFAULT_INVOKE_TIMEOUT, TIMEOUT_PARAMETER, parse_timeout

logger = logging.getLogger(__name__)

_OTHER_TRIAL = re.compile(r"^other_trial_(\d+)$")
RESERVED_KEYS = ("rule_to_invoke", "source_s3_uri", "start_step", "end_step", "action_json", TIMEOUT_PARAMETER)


@dataclass(frozen=True)
class RuleRequest:
    """What the evaluator needs to know besides the rule's own parameters."""

    rule_to_invoke: str | None = None
    source: str | None = None  # source_s3_uri: a local path, file:// or s3:// URI of one .py file
    other_trials: tuple[str, ...] = ()
    start_step: int = 0
    end_step: int | None = None
    action_json: str = ""
    parameters: dict[str, str] = field(default_factory=dict)  # for the rule's constructor
    time_limit: float | None = DEFAULT_INVOKE_TIMEOUT  # invoke_timeout_secs; None: no limit


def _step(name: str, value: str | None, problems: list[str]) -> int | None:
    if value is None or value.strip() == "" or value.strip().lower() == "none":
        return None
    try:
        number = int(value.strip())
    except ValueError:
        problems.append(f"{name}={value!r}: expected a whole number of steps, e.g. '0'")
        return None
    if number < 0:
        problems.append(f"{name}={value!r}: must be 0 or more")
    return number


def split_parameters(parameters: Mapping[str, str]) -> RuleRequest:
    """Separate the evaluator's reserved keys from the rule's parameters.

    Raises:
        ConfigError: a reserved key has a bad value (non-integer step, end_step <= start_step, a
            gap in other_trial_<i>); the message names each key and value.
    """
    problems: list[str] = []
    rest: dict[str, str] = {}
    others: dict[int, str] = {}
    for key, value in parameters.items():
        if not isinstance(value, str):
            problems.append(f"{key}={value!r}: RuleParameters values must be strings")
            continue
        match = _OTHER_TRIAL.match(key)
        if match:
            others[int(match.group(1))] = value
        elif key not in RESERVED_KEYS:
            rest[key] = value
    if others and sorted(others) != list(range(len(others))):
        problems.append(f"other_trial_<i> keys must be numbered 0, 1, 2...; got {sorted(others)}")
    start = _step("start_step", parameters.get("start_step"), problems) or 0
    end = _step("end_step", parameters.get("end_step"), problems)
    if end is not None and end <= start:
        problems.append(f"end_step={parameters.get('end_step')!r}: must be greater than start_step ({start}); "
                        "end_step is exclusive")
    try:
        time_limit = parse_timeout(parameters.get(TIMEOUT_PARAMETER))
    except ConfigError as err:
        problems += err.problems
    if problems:
        raise ConfigError(problems, where="rule parameters")
    source = parameters.get("source_s3_uri") or None
    return RuleRequest(
        rule_to_invoke=(parameters.get("rule_to_invoke") or "").strip() or None,
        source=source.strip() if source else None,
        other_trials=tuple(others[i] for i in sorted(others)),
        start_step=start,
        end_step=end,
        action_json=parameters.get("action_json", "") or "",
        parameters=rest,
        time_limit=time_limit,
    )


def build_rule(
    cls: type[Rule],
    base_trial: Any,
    parameters: Mapping[str, str],
    *,
    other_trials: Sequence[Any] = (),
    action_str: str = "",
    strict: bool | None = None,
) -> Rule:
    """Construct ``cls`` from string parameters, the way SageMaker's evaluator does.

    Args:
        strict: reject unknown parameters (default: True for built-in rules, False for custom ones).

    Raises:
        ConfigError: a required parameter is missing, or (strict) a parameter is unknown.
        Whatever the constructor raises for a bad value (built-ins: ConfigError naming it).
    """
    if not (isinstance(cls, type) and issubclass(cls, Rule)):
        raise ConfigError(f"{cls!r} is not a Rule subclass (from sdk_ext.rules import Rule)", where="rule")
    strict = issubclass(cls, BuiltinRule) if strict is None else strict
    signature = inspect.signature(cls.__init__)
    params = list(signature.parameters.values())[1:]  # drop self
    if not params:
        raise ConfigError(f"{cls.__name__}.__init__ takes no base_trial", where="rule")
    args: list[Any] = [base_trial]
    kwargs: dict[str, Any] = {}
    used: set[str] = set()
    missing: list[str] = []
    accepts_any = False
    for p in params[1:]:
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_any = True
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if p.name == "other_trials":
            if other_trials or p.default is inspect.Parameter.empty:
                kwargs[p.name] = list(other_trials)
            continue
        if p.name == "action_str":
            kwargs[p.name] = action_str
            continue
        if p.name in parameters:
            kwargs[p.name] = parameters[p.name]
            used.add(p.name)
        elif p.default is inspect.Parameter.empty:
            missing.append(p.name)
    problems = [f"required parameter {name!r} for rule {cls.__name__} is missing" for name in missing]
    unknown = sorted(set(parameters) - used)
    if unknown and accepts_any:
        kwargs.update({k: parameters[k] for k in unknown})
    elif unknown:
        accepted = [p.name for p in params[1:] if p.name not in ("other_trials", "action_str")
                    and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        message = (f"unknown parameter(s) {', '.join(f'{k}={parameters[k]!r}' for k in unknown)} for rule "
                   f"{cls.__name__}; it takes: {', '.join(accepted) or 'no parameters'}")
        if strict:
            problems.append(message)
        else:
            logger.warning("%s (ignored, as SageMaker does)", message)
    if problems:
        raise ConfigError(problems, where=f"parameters of rule {cls.__name__}")
    rule = cls(*args, **kwargs)
    if action_str and not rule.has_actions:
        # a custom rule that does not pass action_str to Rule.__init__ still gets its actions
        rule.set_actions(action_str)
    return rule


_SMDEBUG_ALIASES = {
    "smdebug.rules": "sdk_ext.rules",
    "smdebug.rules.rule": "sdk_ext.rules.rule",
    "smdebug.rules.rule_invoker": "sdk_ext.rules.rule_invoker",
    "smdebug.rules.req_tensors": "sdk_ext.rules.req_tensors",
    "smdebug.exceptions": "sdk_ext.exceptions",
    "smdebug.core.modes": "sdk_ext.modes",
    "smdebug.trials": "sdk_ext.trials",
}


@contextlib.contextmanager
def smdebug_aliases() -> Iterator[None]:
    """While active, ``import smdebug.rules`` & co. give the sdk_ext modules (only if smdebug is absent)."""
    if importlib.util.find_spec("smdebug") is not None:
        yield
        return
    added: list[str] = []
    root = types.ModuleType("smdebug")
    root.__path__ = []  # a package, so submodule imports resolve through sys.modules
    core = types.ModuleType("smdebug.core")
    core.__path__ = []
    fakes: dict[str, types.ModuleType] = {"smdebug": root, "smdebug.core": core}
    for alias, target in _SMDEBUG_ALIASES.items():
        try:
            fakes[alias] = importlib.import_module(target)
        except ImportError:  # sdk_ext.trials may be unavailable in a stripped install
            continue
    for name, module in fakes.items():
        if name not in sys.modules:
            sys.modules[name] = module
            added.append(name)
            parent, _, leaf = name.rpartition(".")
            if parent in fakes:
                setattr(fakes[parent], leaf, module)
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)


def load_rule_class(source: str | Path, class_name: str) -> type[Rule]:
    """Import ``class_name`` from the Python file ``source`` (a custom rule).

    A file that imports ``smdebug`` needs :func:`smdebug_aliases` active (the evaluator keeps it on).

    Raises:
        ConfigError: the file does not exist, cannot be imported, or has no such Rule subclass.
    """
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"source {str(source)!r} is not a file", where="custom rule")
    module_name = f"sdk_ext_custom_rule_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"source {str(source)!r} cannot be imported as Python", where="custom rule")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise ConfigError(f"importing {str(source)!r} failed: {type(err).__name__}: {err}",
                          where="custom rule") from err
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Rule)):
        found = sorted(n for n, v in vars(module).items()
                       if isinstance(v, type) and issubclass(v, Rule) and v.__module__ == module_name)
        raise ConfigError(f"rule_to_invoke={class_name!r}: {str(source)!r} defines no Rule subclass of that "
                          f"name (found: {', '.join(found) or 'none'})", where="custom rule")
    return cls


__all__ = ["RESERVED_KEYS", "RuleRequest", "build_rule", "load_rule_class", "smdebug_aliases",
           "split_parameters"]
