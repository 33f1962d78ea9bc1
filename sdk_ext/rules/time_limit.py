"""Time limits of a rule evaluation, for rules that do not cooperate (a loop, a bare ``except BaseException``).

Per invocation: the part of :meth:`~sdk_ext.rules.Rule.invoke` that runs the rule's own code at one
step (``set_required_tensors``, the fetch, ``invoke_at_step``; not the wait for the step) may take at
most ``invoke_timeout_secs`` seconds, a RuleParameter (default :data:`DEFAULT_INVOKE_TIMEOUT`, 300
s; ``0`` turns the limit off). Past it, :class:`InvocationTimeout` is raised in the rule's code
(from ``SIGALRM``, main thread only); it is a BaseException so ``except Exception`` in a rule
cannot swallow it, and :func:`~sdk_ext.rules.invoke_rule` lets it through.

Waiting for the training job is never computing: a rule that replaces ``invoke`` (StalledTrainingRule
waits there for new steps, for as long as its own ``threshold``) is timed too, but every wait inside
:func:`untimed` (the rules' waits for a step, :func:`untimed_sleep`, which the evaluator also gives
its trials for their own waits) stops the clock, and the rule's code after it starts with the whole
limit again. So the limit bounds each stretch of the rule's own code between two waits: a rule stuck
computing at a step still ends at its limit, a rule waiting for data never does.

For a process that must end whatever the rule does (the rule evaluator), :class:`Watchdog` adds a
thread that calls a handler (which writes the final status and returns the exit code) and then
``os._exit``: when an invocation is still running :data:`HARD_GRACE` seconds after its limit (the
rule caught :class:`InvocationTimeout`), and :meth:`Watchdog.exit_after` seconds after SIGTERM.
Library callers (a notebook's ``invoke_rule``) get the exception only; nothing exits their process.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from sdk_ext.exceptions import ConfigError
from sdk_ext.rules.status import EXIT_CODES, STOPPED, read_status

logger = logging.getLogger(__name__)

TIMEOUT_PARAMETER = "invoke_timeout_secs"
DEFAULT_INVOKE_TIMEOUT = 300.0
#: Seconds an invocation may go on after its limit (InvocationTimeout caught) before the watchdog acts.
HARD_GRACE = 2.0
#: Seconds from SIGTERM to the evaluator's forced exit (SageMaker and sdk_ext.local kill later: 10 s locally).
ENV_TERM_GRACE = "SDK_EXT_RULE_TERM_GRACE_SECS"
DEFAULT_TERM_GRACE = 5.0


class InvocationTimeout(BaseException):
    """A rule's invocation at one step ran past its time limit."""

    def __init__(self, rule: str, step: int, limit: float) -> None:
        super().__init__(
            f"rule {rule}: the invocation at step {step} did not finish within {limit:g} s; raise the "
            f"RuleParameter {TIMEOUT_PARAMETER} if the rule needs longer (0 turns the limit off), or fix "
            "the rule if it loops"
        )
        self.rule, self.step, self.limit = rule, step, limit


def parse_timeout(value: str | None) -> float | None:
    """``invoke_timeout_secs`` as seconds; unset or blank: the default; ``0``: None (no limit).

    Raises:
        ConfigError: not a number of seconds >= 0.
    """
    if value is None or not value.strip():
        return DEFAULT_INVOKE_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise ConfigError(f"{TIMEOUT_PARAMETER}={value!r}: expected a number of seconds >= 0 (0: no limit; "
                          f"default {DEFAULT_INVOKE_TIMEOUT:g})", where="rule parameters")
    return seconds or None


def term_grace(environ: Mapping[str, str]) -> float:
    """``SDK_EXT_RULE_TERM_GRACE_SECS`` (default 5): seconds from SIGTERM to a forced exit."""
    try:
        value = float(environ.get(ENV_TERM_GRACE, "") or DEFAULT_TERM_GRACE)
    except ValueError:
        value = DEFAULT_TERM_GRACE
    return value if value >= 0 else DEFAULT_TERM_GRACE


@dataclass
class _Running:
    rule: str
    step: int
    limit: float
    started: float


class Watchdog:
    """Ends the process when the main thread does not (one per process; :func:`watchdog`).

    ``on_stuck(err)`` and the ``exit_after`` action write what the process reports and return its
    exit code; they run on the watchdog thread, then the process exits with that code.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, exit: Callable[[int], None] = os._exit) -> None:
        self._clock, self._exit = clock, exit
        self._lock = threading.Condition()  # guards every field below
        self._running: _Running | None = None
        self._on_stuck: Callable[[InvocationTimeout], int] | None = None
        self._term: tuple[float, Callable[[], int]] | None = None
        self._thread: threading.Thread | None = None

    def on_stuck(self, handler: Callable[[InvocationTimeout], int] | None) -> None:
        """Enable the forced end of a stuck invocation (None: disable)."""
        with self._lock:
            self._on_stuck = handler
            self._lock.notify_all()

    def exit_after(self, seconds: float, action: Callable[[], int]) -> None:
        """In ``seconds``, unless the process has ended, run ``action`` and exit with its code (first call wins)."""
        with self._lock:
            if self._term is None:
                self._term = (self._clock() + seconds, action)
            self._start()
            self._lock.notify_all()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="sdk_ext-rule-watchdog", daemon=True)
            self._thread.start()

    def enter(self, rule: str, step: int, limit: float) -> None:
        with self._lock:
            self._running = _Running(rule, step, limit, self._clock())
            if self._on_stuck is not None:
                self._start()
                self._lock.notify_all()

    def leave(self) -> None:
        with self._lock:
            self._running = None

    def _watch(self) -> None:
        while True:
            with self._lock:
                now = self._clock()
                deadlines = []
                if self._term is not None:
                    deadlines.append(self._term[0])
                running = self._running
                if running is not None and self._on_stuck is not None:
                    deadlines.append(running.started + running.limit + HARD_GRACE)
                due = min(deadlines, default=None)
                if due is None or due > now:
                    self._lock.wait(None if due is None else min(due - now, 1.0))
                    continue
                if self._term is not None and self._term[0] <= now:
                    action: Callable[[], int] = self._term[1]
                    why = "after SIGTERM"
                else:
                    assert running is not None and self._on_stuck is not None
                    action = functools.partial(self._on_stuck, InvocationTimeout(running.rule, running.step,
                                                                                   running.limit))
                    why = f"{running.rule} stuck at step {running.step}"
            logger.error("sdk_ext rule evaluator: forced exit (%s): the rule did not return", why)
            try:
                code = action()
            except BaseException:  # the process must end all the same
                logger.exception("writing the final status failed")
                code = 2
            self._exit(code)
            return


_WATCHDOG = Watchdog()


def watchdog() -> Watchdog:
    """This process's watchdog."""
    return _WATCHDOG


class Reporter(Protocol):
    """What the guard needs of the evaluator (rules/evaluate.py's Evaluator)."""

    phase: str  # "running", "actions" (final status written, actions running) or "final"
    output_dir: str

    def report(self, status: str, details: str = "", step: int | None = None) -> int: ...


class EvaluatorGuard:
    """The rule evaluator's forced exits: a stuck invocation ends in Error, SIGTERM in Stopped within
    ``SDK_EXT_RULE_TERM_GRACE_SECS`` (default 5), whatever the rule does."""

    def __init__(self, guard: Watchdog | None = None, *, environ: Mapping[str, str] = os.environ) -> None:
        self.watchdog = guard or _WATCHDOG
        self.grace = term_grace(environ)

    def on_stuck(self, handler: Callable[[InvocationTimeout], int] | None) -> None:
        """Enable (or, with None, disable) the forced end of an invocation stuck past its limit."""
        self.watchdog.on_stuck(handler)

    def arm(self, evaluator: Reporter) -> None:
        """SIGTERM arrived: make sure the process ends within the grace time."""
        grace = self.grace

        def stop() -> int:
            if evaluator.phase == "running":
                return evaluator.report(STOPPED, f"Rule evaluation stopped by a signal (forced after {grace:g} s: "
                                                 f"the rule did not return; {ENV_TERM_GRACE})")
            written = read_status(evaluator.output_dir)  # final already: exit as it says
            return written.exit_code if written is not None else EXIT_CODES[STOPPED]

        self.watchdog.exit_after(grace, stop)


@dataclass
class _Limit:
    """The time limit running in one thread (:func:`invocation_limit`)."""

    rule: str
    step: int
    seconds: float
    in_main: bool
    paused: bool = False

    def start(self) -> None:
        """Give the rule's code the whole limit from now."""
        _WATCHDOG.enter(self.rule, self.step, self.seconds)
        if self.in_main:
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def stop(self) -> None:
        if self.in_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _WATCHDOG.leave()


_running = threading.local()  # .limit: the _Limit of this thread's invocation, if any


def _current() -> _Limit | None:
    limit: _Limit | None = getattr(_running, "limit", None)
    return limit


@contextlib.contextmanager
def invocation_limit(seconds: float | None, *, rule: str, step: int) -> Iterator[None]:
    """Run the body with a time limit (None: none): :class:`InvocationTimeout` is raised in it past
    ``seconds`` (main thread; elsewhere only the watchdog, if enabled, acts). Waits inside
    :func:`untimed` do not count. Inside another limit (a rule whose ``invoke`` calls
    ``Rule.invoke``) the outer one goes on alone."""
    if not seconds or _current() is not None:
        yield
        return
    limit = _Limit(rule, step, seconds, threading.current_thread() is threading.main_thread())
    previous = None
    if limit.in_main:

        def expire(signum: int, frame: object) -> None:
            raise InvocationTimeout(rule, step, seconds)

        previous = signal.signal(signal.SIGALRM, expire)
    _running.limit = limit
    limit.start()
    try:
        yield
    finally:
        limit.stop()
        _running.limit = None
        if limit.in_main:
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def untimed() -> Iterator[None]:
    """The body waits for the training job (it does not compute): the running invocation's limit,
    if any, is stopped while it runs and starts again in full after it."""
    limit = _current()
    if limit is None or limit.paused:
        yield
        return
    limit.stop()  # an alarm that fires before this is a limit that was reached: it propagates
    limit.paused = True
    try:
        yield
    finally:
        limit.paused = False
        limit.start()


def untimed_sleep(seconds: float) -> None:
    """``time.sleep`` that does not count against the running invocation's limit (:func:`untimed`)."""
    with untimed():
        time.sleep(seconds)


__all__ = [
    "DEFAULT_INVOKE_TIMEOUT",
    "DEFAULT_TERM_GRACE",
    "HARD_GRACE",
    "TIMEOUT_PARAMETER",
    "EvaluatorGuard",
    "InvocationTimeout",
    "Watchdog",
    "invocation_limit",
    "parse_timeout",
    "term_grace",
    "untimed",
    "untimed_sleep",
    "watchdog",
]
