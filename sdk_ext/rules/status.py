"""The rule evaluator's status file, ``<output-dir>/status.json``: written by rules/evaluate.py,
read by whoever runs it (sdk_ext.local). One JSON object, the fields of SageMaker's
``DebugRuleEvaluationStatus`` plus the step::

    {"RuleConfigurationName": "VanishingGradient",
     "RuleEvaluationStatus": "IssuesFound",
     "StatusDetails": "RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient at step 500 ...",
     "LastModifiedTime": "2024-05-01T12:00:03.123456Z",
     "Step": 500}

It is replaced atomically (a temporary file in the same directory, then ``os.replace``), so a
reader sees the previous status or the new one, never a torn one. Exit codes of the evaluator
follow the status (:data:`EXIT_CODES`); any other exit code means Error.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IN_PROGRESS, ISSUES_FOUND, NO_ISSUES_FOUND, ERROR, STOPPED = (
    "InProgress", "IssuesFound", "NoIssuesFound", "Error", "Stopped")
STATUSES = (IN_PROGRESS, ISSUES_FOUND, NO_ISSUES_FOUND, ERROR, STOPPED)
FINAL_STATUSES = frozenset({ISSUES_FOUND, NO_ISSUES_FOUND, ERROR, STOPPED})
EXIT_CODES = {NO_ISSUES_FOUND: 0, ERROR: 2, ISSUES_FOUND: 3, STOPPED: 4}
STATUS_FILE = "status.json"
MAX_DETAILS = 1024  # SageMaker's StatusDetails limit
#: Opens the details of a NoIssuesFound that evaluated no tensor: not a pass (SageMaker has no status for it).
CHECKED_NOTHING = "CheckedNothing:"
#: Opens the details of a NoIssuesFound whose rule has several checks of which some matched no tensor:
#: the named checks evaluated nothing (the others did, and found no issue).
CHECKED_PARTLY = "CheckedPartly:"
_PREFIXES = ("RuleEvaluationConditionMet: ", "ClientError: ", "InternalError: ")
_BOILERPLATE = re.compile(r"^Evaluation of the rule \S+ at step \d+ resulted in the condition being met:?\s*")


def checked_nothing(details: str | None) -> bool:
    """Did this status say its rule evaluated no tensor (see :func:`no_issues_details`)?"""
    return (details or "").startswith(CHECKED_NOTHING)


def checked_partly(details: str | None) -> bool:
    """Did this status say some of its rule's checks evaluated no tensor (see :func:`no_issues_details`)?"""
    return (details or "").startswith(CHECKED_PARTLY)


def no_issues_details(how: str, coverage_note: str | None, part_note: str | None = None) -> str:
    """StatusDetails of a NoIssuesFound: ``how`` the evaluation ended, led by ``CheckedNothing: <why>``
    when the rule matched no tensor, or by ``CheckedPartly: <which checks, why>`` when some of its
    checks matched none (so no reader takes either for a full pass)."""
    if coverage_note:
        return f"{CHECKED_NOTHING} {coverage_note}. {how}"
    return f"{CHECKED_PARTLY} {part_note}. {how}" if part_note else how


def coverage_gap(details: str | None) -> tuple[str, str] | None:
    """For a NoIssuesFound that did not check everything: (``"checked nothing"`` or ``"checked only part"``,
    the reason a person reads, its prefix dropped); None for any other status details."""
    for prefix, label in ((CHECKED_NOTHING, "checked nothing"), (CHECKED_PARTLY, "checked only part")):
        if (details or "").startswith(prefix):
            return label, reason(details)[len(prefix):].strip()
    return None


def reason(details: str | None) -> str:
    """The part of StatusDetails a person reads: without SageMaker's standard prefixes
    (``RuleEvaluationConditionMet: Evaluation of the rule X at step N resulted in the condition being met:``,
    ``ClientError:``), on one line, never cut; a traceback after the message stays in the status file."""
    text = (details or "").split("\nTraceback (most recent call last):", 1)[0]
    text = " ".join(text.split())
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    return _BOILERPLATE.sub("", text)


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def clip(text: str, limit: int = MAX_DETAILS) -> str:
    """``text`` cut to ``limit`` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class RuleStatus:
    rule_configuration_name: str
    status: str
    details: str = ""
    step: int | None = None
    last_modified: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, EXIT_CODES[ERROR])

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    def to_json(self) -> dict[str, Any]:
        return {
            "RuleConfigurationName": self.rule_configuration_name,
            "RuleEvaluationStatus": self.status,
            "StatusDetails": clip(self.details),
            "LastModifiedTime": self.last_modified or utc_now(),
            "Step": self.step,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RuleStatus:
        step = doc.get("Step")
        return cls(
            rule_configuration_name=str(doc.get("RuleConfigurationName", "")),
            status=str(doc.get("RuleEvaluationStatus", "")),
            details=str(doc.get("StatusDetails") or ""),
            step=int(step) if isinstance(step, int) else None,
            last_modified=str(doc.get("LastModifiedTime", "")),
        )


def write_status(output_dir: str | os.PathLike[str], status: RuleStatus) -> Path:
    """Atomically replace ``<output_dir>/status.json`` with ``status``; returns its path."""
    directory = Path(output_dir)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / STATUS_FILE
    data = json.dumps(status.to_json(), ensure_ascii=False, indent=1).encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=".status.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        with_suppressed_unlink(tmp)
        raise
    return target


def with_suppressed_unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_status(output_dir: str | os.PathLike[str]) -> RuleStatus | None:
    """The status in ``<output_dir>/status.json``, or None if there is none yet.

    Raises:
        TypeError: the file exists but is not a status document.
    """
    path = Path(output_dir) / STATUS_FILE
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    if not isinstance(doc, dict):
        raise TypeError(f"{path}: not a rule status document")
    return RuleStatus.from_json(doc)


__all__ = [
    "CHECKED_NOTHING", "ERROR", "EXIT_CODES", "FINAL_STATUSES", "IN_PROGRESS", "ISSUES_FOUND", "MAX_DETAILS", "NO_ISSUES_FOUND",
    "STATUSES", "STATUS_FILE", "STOPPED", "RuleStatus", "checked_nothing", "clip", "no_issues_details", "read_status", "reason",
    "utc_now", "write_status",
]
