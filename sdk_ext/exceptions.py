"""The one exception hierarchy of sdk_ext.

Names and constructor arguments follow smdebug's (``smdebug.exceptions``) so that code written for
smdebug (custom rules, analysis notebooks) catches the same things after swapping the import. Every
class derives from :class:`SdkExtError`. This module depends only on :mod:`sdk_ext.modes`, so every
layer (format, storage, hooks, trials, rules) may raise from it.
"""

from __future__ import annotations

from collections.abc import Iterable

from sdk_ext.modes import ModeKeys


class SdkExtError(Exception):
    """Root of every error sdk_ext raises."""


# --- smdebug's reader/rule exceptions (same names, same arguments) -------------------------------


class TensorUnavailableForStep(SdkExtError):
    """The tensor exists but has no (raw or requested) value at this step."""

    def __init__(
        self, tname: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL, has_reductions: bool = False
    ) -> None:
        self.tname, self.step, self.mode, self.has_reductions = tname, step, mode, has_reductions
        msg = f"value for tensor {tname!r} is not available for step {step} with mode {mode.name}"
        if has_reductions:
            msg += " (this tensor has reductions for this step; use reduction_value())"
        super().__init__(msg)


class TensorUnavailable(SdkExtError):
    """No tensor of that name was ever saved in this trial."""

    def __init__(self, tname: str) -> None:
        self.tname = tname
        super().__init__(f"tensor {tname!r} was not saved in this trial")


class ShapeUnavailableForStep(SdkExtError):
    """Neither a shape entry nor a value exists for the tensor at this step."""

    def __init__(self, tname: str, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        self.tname, self.step, self.mode = tname, step, mode
        super().__init__(f"shape for tensor {tname!r} is not available for step {step} with mode {mode.name}")


class StepUnavailable(SdkExtError):
    """The step was not saved, and later steps show it never will be."""

    def __init__(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        self.step, self.mode = step, mode
        super().__init__(f"step {step} of mode {mode.name} was not saved")


class StepNotYetAvailable(SdkExtError):
    """The step has not been written (by every worker) yet; retry later."""

    def __init__(self, step: int, mode: ModeKeys = ModeKeys.GLOBAL) -> None:
        self.step, self.mode = step, mode
        super().__init__(f"step {step} of mode {mode.name} is not available yet")


class NoMoreData(SdkExtError):
    """Training has ended and the requested step lies beyond the last one saved."""

    def __init__(self, step: int | None = None, mode: ModeKeys = ModeKeys.GLOBAL,
                 last_step: int | None = None) -> None:
        self.step, self.mode, self.last_step = step, mode, last_step
        super().__init__(
            f"no more data: training has ended; step {step} of mode {mode.name} is beyond the last "
            f"saved step {last_step}"
        )


class NoMoreProfilerData(NoMoreData):
    """Training has ended and a profiler rule's next time window starts past the profiler data.

    ``timestamp``: where that window ends (microseconds since the epoch), as in smdebug.
    """

    def __init__(self, timestamp: int | float) -> None:
        SdkExtError.__init__(self, f"no more profiler data: the training job has ended and its profiler data "
                                   f"ends before {int(timestamp)} us")
        self.step, self.mode, self.last_step = None, ModeKeys.GLOBAL, None
        self.timestamp = timestamp


class RuleEvaluationConditionMet(SdkExtError):
    """A rule found an issue at ``step``. ``end_of_rule`` asks the invoker to stop evaluating."""

    def __init__(self, rule_name: str, step: int, end_of_rule: bool = False, message: str = "") -> None:
        self.rule_name, self.step, self.end_of_rule, self.message = rule_name, step, end_of_rule, message
        # smdebug's exact wording (SageMaker shows it in StatusDetails; users match on it)
        text = f"Evaluation of the rule {rule_name} at step {step} resulted in the condition being met"
        if message:
            text += f": {message}"
        super().__init__(text)


class InsufficientInformationForRuleInvocation(SdkExtError, ValueError):
    """A rule was configured without what it needs to decide anything (e.g. no tensors to look at)."""

    def __init__(self, rule_name: str, message: str) -> None:
        self.rule_name, self.message = rule_name, message
        super().__init__(f"Insufficient information to invoke rule {rule_name}: {message}")


class InvalidWorker(SdkExtError):
    """The named worker did not write the requested step."""

    def __init__(self, worker: str, available: Iterable[str] = ()) -> None:
        self.worker = worker
        self.available = sorted(available)
        hint = f"; workers that wrote it: {', '.join(self.available)}" if self.available else ""
        super().__init__(f"invalid worker {worker!r}{hint}")


class MissingCollectionFiles(SdkExtError):
    """The trial path holds no (or too few) collections files."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or "no collections files found: the path is not a Debugger trial or nothing was saved yet"
        )


class DamagedDataError(SdkExtError):
    """Data a trial needs is damaged or missing: a file cut short, emptied or deleted, a checksum that
    does not match, an index that contradicts its event file.

    Never a kind of "not available" (:class:`TensorUnavailableForStep`, :class:`StepUnavailable`):
    code written for smdebug that skips a step on those must not skip damage, so a rule that could
    not read a step it was asked to judge ends in Error instead of passing.

    Attributes:
        key: the damaged file (a key under the trial root, or a path), if known.
        offset: the byte offset in it where the damage was found, if known.
        tensor: the tensor whose value could not be read, if known.
        step: the global step being read (or judged by a rule), if known.
    """

    def __init__(self, message: str, *, key: str | None = None, offset: int | None = None,
                 tensor: str | None = None, step: int | None = None) -> None:
        self.key, self.offset, self.tensor, self.step = key, offset, tensor, step
        super().__init__(message)


class IndexReaderException(DamagedDataError):
    """An index file is corrupt, invalid, or its name cannot be parsed."""


# --- smdebug's general error types (smdebug.exceptions.SMDebug*), so ``except`` clauses port -------

#: smdebug's base of its general errors; here the root of every sdk_ext error.
SMDebugError = SdkExtError


class SMDebugCustomerError(SdkExtError):
    """An error in the user's own setup (smdebug's name)."""


class SMDebugTypeError(SdkExtError, TypeError):
    """A value of the wrong type (smdebug's name)."""


class SMDebugValueError(SdkExtError, ValueError):
    """An invalid value (smdebug's name)."""


class SMDebugRuntimeError(SdkExtError, RuntimeError):
    """An operation that cannot be done in the current state (smdebug's name), e.g. a hook asked to write
    into a trial that has ended."""


class SMDebugNotImplementedError(SdkExtError, NotImplementedError):
    """smdebug's name for an operation a hook does not support."""


# --- sdk_ext's own ---------------------------------------------------------------------------------


class CorruptRecordError(DamagedDataError):
    """A record in an event file fails its checks (CRC, checksum, footer, length, payload)."""

    def __init__(self, name: str, offset: int, reason: str, *, tensor: str | None = None) -> None:
        self.name, self.reason = name, reason
        what = f" (tensor {tensor!r})" if tensor is not None else ""
        super().__init__(f"{name}: corrupt record at byte offset {offset}{what}: {reason}", key=name, offset=offset,
                         tensor=tensor)


class MissingEventFileError(DamagedDataError):
    """An index file names an event file that is missing or shorter than the index says, and it will
    not come: its writer commits the event file before the index (sdk_ext), training has ended, or the
    worker has written later steps since."""

    def __init__(self, key: str, reason: str, *, tensor: str | None = None, step: int | None = None) -> None:
        self.reason = reason
        at = f" at step {step}" if step is not None else ""
        what = f" (value of {tensor!r}{at})" if tensor is not None else ""
        super().__init__(f"{key}: event file damaged{what}: {reason}", key=key, tensor=tensor, step=step)


class CorruptProfilerRecordError(SdkExtError, ValueError):
    """A line of a profiler-output file (system metrics JSON line, trace event) that is not a record.

    Only raised for a line before the file's last: a torn last line is what a writer still appending
    (or killed mid-line) leaves, and is skipped. A ValueError, as smdebug's reader raised.
    """

    def __init__(self, name: str, line: int, reason: str) -> None:
        self.name, self.line, self.reason = name, line, reason
        super().__init__(f"{name}: line {line} is not a profiler record: {reason}")


class UnsupportedDtypeError(SdkExtError, TypeError):
    """A value cannot be stored in (or decoded from) the format."""


class EmptyTensorError(SdkExtError, ValueError):
    """A reduction of a tensor with no elements was asked for: there is nothing to reduce."""


class ConfigError(SMDebugValueError):
    """Invalid configuration. Holds every problem found, so one fix round is enough."""

    def __init__(self, problems: str | Iterable[str], *, where: str = "") -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        head = f"invalid {where}: " if where else "invalid configuration: "
        if len(self.problems) == 1:
            text = head + self.problems[0]
        else:
            text = head + f"{len(self.problems)} problems:\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(text)


class InvalidCollectionConfiguration(ConfigError):
    """A collection that can match nothing (no include_regex, no tensor names)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"collection {name!r} has neither include_regex nor tensor names; "
            "give it include_regex (e.g. CollectionConfig parameters {'include_regex': '.*relu.*'})",
            where="collection",
        )


class StorageError(SdkExtError, OSError):
    """A storage operation failed (listing, reading, writing). Never means "no data yet"."""


class StorageNotFound(StorageError):
    """The bucket, prefix or key does not exist."""


class StorageAccessDenied(StorageError):
    """Credentials do not allow the operation."""


__all__ = [
    "ConfigError",
    "CorruptProfilerRecordError",
    "CorruptRecordError",
    "DamagedDataError",
    "EmptyTensorError",
    "IndexReaderException",
    "InsufficientInformationForRuleInvocation",
    "InvalidCollectionConfiguration",
    "InvalidWorker",
    "MissingCollectionFiles",
    "MissingEventFileError",
    "NoMoreData",
    "NoMoreProfilerData",
    "RuleEvaluationConditionMet",
    "SMDebugCustomerError",
    "SMDebugError",
    "SMDebugNotImplementedError",
    "SMDebugRuntimeError",
    "SMDebugTypeError",
    "SMDebugValueError",
    "SdkExtError",
    "ShapeUnavailableForStep",
    "StepNotYetAvailable",
    "StepUnavailable",
    "StorageAccessDenied",
    "StorageError",
    "StorageNotFound",
    "TensorUnavailable",
    "TensorUnavailableForStep",
    "UnsupportedDtypeError",
]
