"""Checks made before a local job starts, and why a finished job saved nothing.

Inside SageMaker a hook configuration the hook cannot use is logged by the hook, which then lets
training go on without saving anything: the job completes and every rule ends "No debugging data".
Locally the same configuration is refused before anything starts (:func:`hook_config_problems`),
and a job that saved nothing says why (:func:`no_data_reason`).
"""

from __future__ import annotations

import difflib
import json
import logging
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sdk_ext.exceptions import ConfigError

logger = logging.getLogger(__name__)

_LOG_PREFIX = re.compile(r"^\[[^\]]*\]\s*")  # the hook's "[sdk_ext ERROR <time>] "
_HOOK_SAID = re.compile(r"sdk_ext.*(not saving|failed|disabled|ConfigError|invalid)", re.IGNORECASE)


def hook_config_problems(request: Mapping[str, Any]) -> list[str]:
    """What the training job's hook would refuse in the request's ``DebugHookConfig`` (empty: nothing).

    The check builds the hook the job would build (a dry run: nothing is written) from the same
    configuration, so it finds exactly what the hook would log and give up on.
    """
    config = request.get("DebugHookConfig")
    if not isinstance(config, Mapping):
        return []
    from sdk_ext.hooks import Hook, json_config, registry

    problems = collection_typos(config)
    with tempfile.TemporaryDirectory(prefix="sdk-ext-preflight-") as scratch:
        try:
            kwargs = json_config.hook_kwargs_from_config({**config, "LocalPath": scratch},
                                                         builtin=Hook.builtin_collections, env={})
            hook = Hook(kwargs.pop("out_dir"), dry_run=True, **kwargs)
        except ConfigError as err:
            return [*problems, *(p for p in err.problems if p not in problems)]
        registry.forget(hook)
    return problems


def collection_typos(config: Mapping[str, Any]) -> list[str]:
    """Collections that look like a misspelt built-in one: an unknown name with no ``include_regex``, close
    to a name the hook knows. Such a collection saves nothing (a script may still fill a collection of a
    new name itself, so only names that look like a typo are refused)."""
    known = known_collections()
    problems = []
    for entry in config.get("CollectionConfigurations") or []:
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("CollectionName")
        params = entry.get("CollectionParameters") or {}
        if not isinstance(name, str) or name in known or (isinstance(params, Mapping) and "include_regex" in params):
            continue
        hint = did_you_mean(name, known)
        if hint:
            problems.append(f"collection {name!r} is not one the hook knows and has no include_regex, so it would "
                            f"save nothing{hint}; if the script fills a collection of that name itself, give it "
                            f"an include_regex ({name}:include_regex=REGEX)")
    return problems


MODE_PREFIXES = ("train.", "eval.", "predict.", "global.")  # what a save key may be led by


def unknown_keys(keys: list[str], *, collection: bool) -> list[tuple[str, str]]:
    """``(key, did-you-mean hint)`` for each key the hook does not read (it would ignore it with a warning)."""
    from sdk_ext.hooks.json_config import COLLECTION_KEYS, HOOK_KEYS

    allowed = sorted(COLLECTION_KEYS if collection else HOOK_KEYS)
    out = []
    for key in keys:
        base = next((key[len(p):] for p in MODE_PREFIXES if key.startswith(p)), key)
        if base not in allowed:
            out.append((key, did_you_mean(base, allowed)))
    return out


def known_collections() -> list[str]:
    """The collections a hook knows without an ``include_regex`` (what ``--collection NAME`` may name)."""
    from sdk_ext.hooks import Hook
    from sdk_ext.hooks.collections import KNOWN_NAMES

    return sorted(set(KNOWN_NAMES) | set(Hook.builtin_collections))


def did_you_mean(name: str, choices: list[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or an empty string."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(name.lower(), [c.lower() for c in choices], n=1, cutoff=0.6)
        close = [c for c in choices if close and c.lower() == close[0]]
    return f" (did you mean {close[0]!r}?)" if close else ""


def saved_nothing(trial_dir: Path) -> bool:
    """True when the trial holds no saved step (no event or index file)."""
    return not any(p.is_file() for sub in ("events", "index") for p in (trial_dir / sub).rglob("*"))


def no_data_reason(*, training_log: Path, command: list[str] | None, save_interval: str | None,
                   status: str) -> str:
    """Why a job saved nothing, and what to change, in one sentence.

    In order: what the hook itself logged; the training failing first; no hook at all (no
    zero-change launcher, no hook code); else the save configuration matched no step that ran.
    """
    try:
        lines = training_log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    said = next((ln.strip() for ln in lines if _HOOK_SAID.search(ln)), None)
    if said:
        return f"the hook said: {_LOG_PREFIX.sub('', said)}"
    if status == "Failed":
        return "training failed before the hook saved a step (see the FailureReason)"
    launched = command is not None and "-m" in command[1:2]
    if not launched:
        return ("the script created no hook and ran without the zero-change hook (it imports no framework "
                "sdk-ext knows): pass --zero-change, or create the hook in the script "
                "(sdk_ext.pytorch.Hook.create_from_json_file() and hook.register_module(model))")
    every = f" (every {save_interval} steps)" if save_interval else ""
    return (f"the hook saved no step: the save configuration{every} matched none of the steps that ran, or "
            "the model never ran a forward pass; lower --save-interval or train for more steps")


def no_data_note(job: Mapping[str, Any] | None, job_dir: Path | None) -> str | None:
    """For a finished local job (its job.json and directory) that saved nothing: why; else None."""
    if not job or job_dir is None or job.get("TrainingJobStatus") in (None, "InProgress", "Stopping"):
        return None
    local = job.get("SdkExtLocal") or {}
    trial = Path(local.get("TrialDir") or job_dir / "output" / "tensors")
    try:
        request = json.loads((job_dir / "request.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        request = {}
    if "DebugHookConfig" not in request or not saved_nothing(trial):
        return None
    interval = ((request.get("DebugHookConfig") or {}).get("HookParameters") or {}).get("save_interval")
    return no_data_reason(training_log=job_dir / "logs" / "training.log", command=local.get("Command"),
                          save_interval=interval, status=str(job.get("TrainingJobStatus")))


__all__ = ["MODE_PREFIXES", "collection_typos", "did_you_mean", "hook_config_problems", "known_collections", "no_data_note", "no_data_reason",
           "saved_nothing", "unknown_keys"]
