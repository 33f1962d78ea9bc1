"""What a report shows, read from a trial and (if there is one) its job: the numbers, no HTML.

``PATH`` is a local job directory (it has ``job.json``; the trial is its ``output/tensors``) or a trial
(a directory or ``s3://`` prefix), optionally with a job description (``job.json`` or a saved
DescribeTrainingJob response). Plotted:

* losses: the ``losses`` collection's tensors (else tensors named like ``*loss*``), value per step,
  one series per mode when the job ran more than one (TRAIN and EVAL losses are not one line);
* gradient and weight norms per layer: the ``gradients`` / ``weights`` collections (else tensors named
  ``gradient/...`` / ``*.weight``), L2 norm per step, the stored ``l2`` reduction when the hook saved
  one, else computed from the saved value;
* saved scalars: ``scalar/...`` tensors (``hook.save_scalar``) and the ``metrics`` / ``sm_metrics`` /
  ``optimizer_variables`` collections (a learning rate), value per step;
* rule verdicts: each rule status with a step (IssuesFound) is a marker on every chart.

Beside the charts: each rule's parameters (from the job's DebugRuleConfigurations), why a job saved
no data (preflight.py), and the tail of the training log when the job failed.

Every chart's x axis is the global step, over the same range (the trial's first to last saved step),
so a step lines up across charts. A verdict's step is shown with its mode step (``58 (TRAIN step 42)``)
when the job set modes, since the script's own step count is usually the mode's.

Long trials are sampled: at most ``max_points`` steps per chart, evenly spread, plus every step a
rule fired at. At most ``max_series`` layers per chart; the rest are counted, not drawn.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sdk_ext.exceptions import MissingCollectionFiles, SdkExtError
from sdk_ext.local.jobs import claim
from sdk_ext.local.jobs.rule_jobs import step_from_details
from sdk_ext.local.report.profiling_data import ProfileData, collect_profile
from sdk_ext.local.report.svg import Series
from sdk_ext.local.report.xgboost_parts import Importance, importance, metric_series
from sdk_ext.modes import ModeKeys
from sdk_ext.trials import Trial, create_trial

logger = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]  # (done, total, what)


@dataclass(frozen=True, slots=True)
class Verdict:
    rule: str
    status: str
    step: int | None
    details: str


@dataclass(slots=True)
class Panel:
    """One chart's data: series plus how many candidate tensors were left out."""

    series: list[Series]
    omitted: int = 0
    log_y: bool = False


@dataclass(slots=True)
class ReportData:
    title: str
    trial_path: str
    steps: list[int]
    modes: dict[str, int]
    workers: list[str]
    tensor_count: int
    collections: dict[str, int]
    job: dict[str, Any] | None
    verdicts: list[Verdict]
    stopped_by: list[dict[str, Any]] = field(default_factory=list)  # auto-stop decisions that stopped the job
    step_modes: dict[int, tuple[str, int]] = field(default_factory=dict)  # verdict step -> (mode, mode step)
    losses: Panel = field(default_factory=lambda: Panel([]))
    gradients: Panel = field(default_factory=lambda: Panel([]))
    weights: Panel = field(default_factory=lambda: Panel([]))
    scalars: Panel = field(default_factory=lambda: Panel([]))
    rule_parameters: dict[str, dict[str, str]] = field(default_factory=dict)  # rule -> RuleParameters
    no_data: str | None = None  # why the job saved nothing (None: it saved something, or no job)
    log_tail: list[str] = field(default_factory=list)  # the training log's last lines, when the job failed
    metrics: Panel = field(default_factory=lambda: Panel([]))  # metrics that are not losses (XGBoost: auc...)
    importance: Importance | None = None  # feature importance (XGBoost)
    profile: ProfileData | None = None  # the job's profiler output and profiler rules, when it has either

    def step_text(self, step: int) -> str:
        """``58 (TRAIN step 42)`` for a step of a mode, ``58`` for a GLOBAL or unknown one."""
        return step_text(step, self.step_modes)


def step_text(step: int, step_modes: Mapping[int, tuple[str, int]]) -> str:
    found = step_modes.get(step)
    return f"{step} ({found[0]} step {found[1]})" if found is not None else str(step)


def modes_of_steps(trial: Trial, steps: Sequence[int]) -> dict[int, tuple[str, int]]:
    """``{step: (mode name, mode step)}`` for those of ``steps`` that belong to a mode (not GLOBAL)."""
    found: dict[int, tuple[str, int]] = {}
    for step in steps:
        mode, mode_step = trial.mode_modestep(step)
        if isinstance(mode, ModeKeys) and mode is not ModeKeys.GLOBAL and mode_step is not None:
            found[step] = (mode.name, mode_step)
    return found


def verdict_step_modes(path: str | os.PathLike[str], steps: Sequence[int]) -> dict[int, tuple[str, int]]:
    """:func:`modes_of_steps` for a job directory or trial path; empty if the trial cannot be read."""
    if not steps:
        return {}
    try:
        return modes_of_steps(create_trial(locate(path)[0], timeout=0), steps)
    except (SdkExtError, OSError, ValueError) as err:
        logger.debug("modes of steps %s not read: %s", steps, err)
        return {}


def locate(path: str | os.PathLike[str], job_file: str | os.PathLike[str] | None = None) -> tuple[str, dict[str, Any] | None, Path | None]:
    """(trial path, job description or None, job directory or None) for a job dir or a trial path."""
    text = os.fspath(path)
    job_dir = Path(text) if not text.startswith("s3://") and (Path(text) / "job.json").is_file() else None
    job: dict[str, Any] | None = None
    if job_file is not None:
        job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    elif job_dir is not None:
        # a job whose runner was killed is ended Failed here, naming the runner (it cannot say so itself)
        job = claim.settle(job_dir) or json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    if job_dir is not None:
        assert job is not None
        trial = (job.get("SdkExtLocal") or {}).get("TrialDir") or str(job_dir / "output" / "tensors")
        return trial, job, job_dir
    return text, job, None


def verdicts_of(job: Mapping[str, Any] | None) -> list[Verdict]:
    if not job:
        return []
    local_rules = (job.get("SdkExtLocal") or {}).get("Rules") or {}
    out = []
    for status in job.get("DebugRuleEvaluationStatuses") or []:
        name = status["RuleConfigurationName"]
        details = status.get("StatusDetails") or ""
        step = (local_rules.get(name) or {}).get("Step")
        if step is None and status["RuleEvaluationStatus"] == "IssuesFound":
            step = step_from_details(details)
        out.append(Verdict(name, status["RuleEvaluationStatus"], step, details))
    return out


def stop_decisions(job_dir: Path | None) -> list[dict[str, Any]]:
    """The auto-stop handler's decisions that stopped the job (from the local job's events.jsonl)."""
    if job_dir is None or not (job_dir / "events.jsonl").is_file():
        return []
    decisions = []
    for line in (job_dir / "events.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        for result in record.get("results") or []:
            value = result.get("result")
            if isinstance(value, dict) and value.get("action") == "stopped":
                decisions.append({**value, "time": record["event"].get("time")})
    return decisions


def sample_steps(steps: Sequence[int], max_points: int, keep: Sequence[int] = ()) -> list[int]:
    """At most ``max_points`` of ``steps`` (sorted), evenly spread, always with the first, last and ``keep``."""
    if len(steps) <= max_points:
        return list(steps)
    picked = {steps[round(i * (len(steps) - 1) / (max_points - 1))] for i in range(max_points)}
    picked.update(s for s in keep if s in set(steps))
    return sorted(picked)


def _scalar(value: Any) -> float:
    array = np.asarray(value, dtype=np.float64)
    return float(array.reshape(-1)[0]) if array.size == 1 else float(np.mean(array))


def _names(trial: Trial, collection: str, fallback: Callable[[str], bool]) -> list[str]:
    names: set[str] = set()
    if collection in trial.collections():
        names = {n for n in trial.collection(collection).tensor_names if trial.has_tensor(n)}
    if not names:
        names = {n for n in trial.tensor_names() if fallback(n)}
    return sorted(names)


_LOSS = re.compile(r"loss", re.IGNORECASE)


def collect(path: str | os.PathLike[str], *, job_file: str | os.PathLike[str] | None = None,
            max_series: int = 12, max_points: int = 400, progress: Progress | None = None,
            trial_timeout: float = 5.0) -> ReportData:
    """Read everything a report shows.

    Raises:
        MissingCollectionFiles: nothing was saved at ``path`` (after ``trial_timeout`` seconds).
    """
    trial_path, job, job_dir = locate(path, job_file)
    verdicts = verdicts_of(job)
    around = _job_context(job, job_dir)
    around["profile"] = profile_of(path, job, job_dir, max_points=max_points)
    if around["profile"] is not None and not (job or {}).get("DebugRuleConfigurations"):
        around["no_data"] = None  # a job that only profiles saving no tensors is not a problem
    try:
        trial = create_trial(trial_path, timeout=trial_timeout)
    except MissingCollectionFiles:
        if job is None and around["profile"] is not None:  # profiler output only
            return ReportData(title=Path(os.fspath(path)).name, trial_path=str(trial_path), steps=[], modes={},
                              workers=[], tensor_count=0, collections={}, job=None, verdicts=[], **around)
        if job is None:
            raise
        # a job that saved nothing still gets its report: the rules, why nothing was saved, the log
        return ReportData(title=job.get("TrainingJobName") or str(trial_path), trial_path=str(trial_path), steps=[],
                          modes={}, workers=[], tensor_count=0, collections={}, job=job, verdicts=verdicts,
                          stopped_by=stop_decisions(job_dir), **around)
    steps = trial.steps()
    marks = [v.step for v in verdicts if v.step is not None]
    picked = sample_steps(steps, max_points, marks)
    losses = _names(trial, "losses", lambda n: bool(_LOSS.search(n)) and not n.startswith("gradient/"))
    grads = _names(trial, "gradients", lambda n: n.startswith("gradient/"))
    weights = _names(trial, "weights", lambda n: n.endswith(".weight") and not n.startswith("gradient/"))
    taken = set(losses) | set(grads) | set(weights)
    scalars = [n for n in _names(trial, "metrics", lambda n: n.startswith("scalar/"))
               + _names(trial, "sm_metrics", lambda n: False) + _names(trial, "optimizer_variables", lambda n: False)
               if n not in taken]
    scalars = list(dict.fromkeys(scalars))
    work = [("loss", n) for n in losses[:max_series]] + [("grad", n) for n in grads[:max_series]] + \
        [("weight", n) for n in weights[:max_series]] + [("scalar", n) for n in scalars[:max_series]]
    series: dict[tuple[str, str], list[Series]] = {}
    workers = trial.workers()
    for done, (kind, name) in enumerate(work):
        if progress is not None:
            progress(done, len(work), name)
        if kind == "loss" and len(workers) > 1:  # each worker's own loss: a rank whose data went bad shows
            series[(kind, name)] = [s for w in workers[:max_series] for s in _split_by_mode(
                trial, _read(trial, name, picked, norm=False, worker=w, label=f"{name} [{w}]"))]
            continue
        line = _read(trial, name, picked, norm=kind in ("grad", "weight"))
        series[(kind, name)] = _split_by_mode(trial, line) if kind in ("loss", "scalar") else [line]
    if progress is not None:
        progress(len(work), len(work), "")
    title = (job or {}).get("TrainingJobName") or trial.name
    modes: dict[str, int] = {}
    for step in steps:
        mode = trial.mode(step)
        key = mode.name if isinstance(mode, ModeKeys) else "unknown"
        modes[key] = modes.get(key, 0) + 1
    collections = {name: len(c.tensor_names) for name, c in sorted(trial.collections().items())}

    def panel(kind: str, names: list[str]) -> Panel:
        chosen = [line for n in names[:max_series] for line in series[(kind, n)]]
        finite = [v for s in chosen for v in s.values if math.isfinite(v)]
        log_y = kind in ("grad", "weight") or (bool(finite) and min(finite) > 0 and max(finite) / min(finite) > 1e3)
        return Panel(chosen, max(0, len(names) - max_series), log_y)

    metric_lines, metrics_omitted = metric_series(trial, picked, max_series)
    return ReportData(title=title, trial_path=str(trial_path), steps=steps, modes=modes, workers=trial.workers(),
                      tensor_count=len(trial.tensor_names()), collections=collections, job=job,
                      verdicts=verdicts, stopped_by=stop_decisions(job_dir), losses=panel("loss", losses),
                      gradients=panel("grad", grads), weights=panel("weight", weights),
                      scalars=panel("scalar", scalars), step_modes=modes_of_steps(trial, marks),
                      metrics=Panel(metric_lines, metrics_omitted), importance=importance(trial), **around)


LOG_TAIL_LINES = 40


def profile_of(path: str | os.PathLike[str], job: Mapping[str, Any] | None, job_dir: Path | None, *,
               max_points: int) -> ProfileData | None:
    """The profiling part's data: for a job that profiled or ran profiler rules, or a profiler-output path."""
    from sdk_ext.profiler.profiler_trial import profiler_root

    root = profiler_root(job_dir if job_dir is not None else path)
    local = not root.startswith("s3://")
    has_output = (Path(root) / "system").is_dir() or (Path(root) / "framework").is_dir() if local \
        else root.rstrip("/").endswith("profiler-output")
    if not has_output and not (job or {}).get("ProfilerRuleConfigurations"):
        return None
    try:
        return collect_profile(root, job=job, job_dir=job_dir, max_points=max_points)
    except SdkExtError as err:
        logger.warning("the profiler output at %s was not read: %s", root, err)
        return None


def _job_context(job: Mapping[str, Any] | None, job_dir: Path | None) -> dict[str, Any]:
    """The report's facts from the job rather than the trial: rule parameters, no-data reason, log tail."""
    from sdk_ext.local.jobs.preflight import no_data_note

    parameters = {r["RuleConfigurationName"]: {k: str(v) for k, v in (r.get("RuleParameters") or {}).items()}
                  for r in (job or {}).get("DebugRuleConfigurations") or [] if r.get("RuleConfigurationName")}
    tail: list[str] = []
    if job_dir is not None and (job or {}).get("TrainingJobStatus") == "Failed":
        try:
            tail = (job_dir / "logs" / "training.log").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            tail = []
        tail = tail[-LOG_TAIL_LINES:]
    return {"rule_parameters": parameters, "no_data": no_data_note(job, job_dir), "log_tail": tail}


def _split_by_mode(trial: Trial, line: Series) -> list[Series]:
    """One series per mode (``name (TRAIN)``, ``name (EVAL)``; x stays the global step) when the
    tensor was saved in more than one mode; else ``line`` as it is."""
    by_mode: dict[ModeKeys, tuple[list[float], list[float]]] = {}
    for step, value in zip(line.steps, line.values):
        mode = trial.mode(int(step)) or ModeKeys.GLOBAL
        xs, ys = by_mode.setdefault(mode, ([], []))
        xs.append(step)
        ys.append(value)
    if len(by_mode) < 2:
        return [line]
    return [Series(f"{line.name} ({mode.name})", *by_mode[mode]) for mode in sorted(by_mode, key=lambda m: m.value)]


def _read(trial: Trial, name: str, steps: Sequence[int], *, norm: bool, worker: str | None = None,
          label: str | None = None) -> Series:
    tensor = trial.tensor(name)
    have = set(tensor.steps())
    xs, ys = [], []
    for step in steps:
        if step not in have:
            continue
        try:
            value = _l2(tensor, step) if norm else _scalar(tensor.value(step, worker=worker))
        except SdkExtError as err:  # a value lost with a crashed step: leave the point out
            logger.debug("report: %s at step %d unreadable: %s", name, step, err)
            continue
        xs.append(step)
        ys.append(value)
    return Series(label or name, xs, ys)


def _l2(tensor: Any, step: int) -> float:
    """The L2 norm of the whole tensor: the stored ``l2`` reduction if any, else computed from the value."""
    with np.errstate(all="ignore"):
        return _scalar(tensor.reduction_value(step, "l2"))
