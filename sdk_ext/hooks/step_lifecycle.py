"""A hook's steps and modes, and its fail-open boundary (the part of :class:`~sdk_ext.hooks.Hook` that
decides *when* things happen; saving and the output's lifecycle live in :mod:`sdk_ext.hooks.hook`).

Steps: every :meth:`HookSteps.begin_step` advances the global step and the step of the current mode
(both start at 0). A value saved outside an open step opens the next one. What a step saves is
decided by :class:`~sdk_ext.hooks.policy.SavePolicy`; the files of a saved step are opened when it
starts (or when collections change inside it) and committed when it ends.

Failure policy: after the constructor, no public method raises. :func:`guarded` is the boundary: the
first failure is logged once with its traceback, the hook disables itself and training goes on.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from sdk_ext.exceptions import SMDebugValueError
from sdk_ext.hooks import termination
from sdk_ext.hooks.output import TrialOutput
from sdk_ext.hooks.policy import SavePolicy
from sdk_ext.hooks.step_counter import Step, StepCounter
from sdk_ext.modes import ModeKeys
from sdk_ext.profiler.timeline import StepTimeline

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


def guarded(method: F) -> F:
    """The one fail-open boundary: a failure disables the hook instead of reaching the training loop."""

    @functools.wraps(method)
    def wrapper(self: HookSteps, *args: Any, **kwargs: Any) -> Any:
        if self._disabled:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception:  # noqa: BLE001 - everything; training must go on
            self._fail(method.__name__)
            return None
        finally:
            if termination.pending is not None:  # a SIGTERM waited for this call to end
                termination.leaving(inspect.currentframe())

    return wrapper  # type: ignore[return-value]


termination.ENTRY_POINTS.add(guarded(lambda self: None).__code__)  # every guarded method shares this code


class StepNumber(int):
    """A hook's current global step (an int: compare it, store it, use it as a dict key, as code written
    for smdebug's ``hook.step`` does) that is also callable as the step context (``with hook.step():``)."""

    _hook: HookSteps

    def __new__(cls, value: int, hook: HookSteps) -> StepNumber:
        number = super().__new__(cls, value)
        number._hook = hook
        return number

    def __call__(self, global_step: int | None = None) -> contextlib.AbstractContextManager[int]:
        return self._hook._step_context(global_step)

    def __reduce__(self) -> tuple[Any, tuple[int]]:
        return int, (int(self),)  # copies and pickles are plain ints


class HookSteps:
    """Step and mode bookkeeping of a hook; :class:`~sdk_ext.hooks.Hook` sets the fields below."""

    out_dir: str
    policy: SavePolicy
    failure: BaseException | None  #: the exception that disabled the hook, if one did
    _out: TrialOutput | None
    _worker_ready: bool
    _disabled: bool
    _explicit_steps: bool  # the script calls begin_step/step(): forward calls do not start steps
    _steps: StepCounter
    _in_step: bool
    _held: list[Any]  # values given before their step was open
    _checked_empty: bool  # the first saved step looked for included collections that match nothing
    _timeline: StepTimeline | None  # profiling on: each step's start and duration (sdk_ext.profiler.timeline)

    def _setup_worker(self) -> None:
        """Resolve rank and world size at the first step; open the output if this worker writes."""
        raise NotImplementedError

    def _write_held(self) -> None:
        """Write the values held for the step that just opened."""
        raise NotImplementedError

    def _check_empty_collections(self) -> None:
        """Warn about included collections that can match nothing (called at the first saved step)."""
        raise NotImplementedError

    # --- public API ------------------------------------------------------------------------------

    @property
    def global_step(self) -> int:
        """The current (or last) global step; -1 before the first."""
        return self._steps.current.global_step

    @property
    def mode(self) -> ModeKeys:
        return self._steps.mode

    @property
    def mode_step(self) -> int:
        """The step within the mode of the current step."""
        return self._steps.current.mode_step

    @property
    def disabled(self) -> bool:
        """True once the hook has failed (or was closed): it saves nothing more."""
        return self._disabled

    def set_mode(self, mode: ModeKeys | str | int) -> None:
        """Set the mode of the steps that follow (an open step keeps its own).

        Raises:
            SMDebugValueError: ``mode`` names no mode (a ValueError, as in smdebug: a mistake in the
                call, reported where it is made rather than turned into a disabled hook).
        """
        try:
            parsed = ModeKeys.parse(mode)
        except ValueError as err:
            raise SMDebugValueError(f"set_mode: {err}") from err
        self._set_mode(parsed)

    @guarded
    def _set_mode(self, mode: ModeKeys) -> None:
        self._steps.mode = mode

    @guarded
    def begin_step(self, global_step: int | None = None) -> None:
        """Start the next step (closing an open one). ``global_step`` jumps ahead, e.g. after a restart."""
        self._explicit_steps = True
        self._begin_step(global_step)

    @guarded
    def begin_implicit_step(self) -> None:
        """Start the next step unless the script drives steps itself (begin_step/step()): what a framework
        wrapper calls where its framework starts a step (e.g. a GradientTape entered in a custom loop)."""
        if not self._explicit_steps:
            self._begin_step(None)

    @guarded
    def end_step(self) -> None:
        """Finish the open step: its files are complete once this returns (or soon after, see flush)."""
        self._end_step()

    @property
    def step(self) -> StepNumber:
        """The current global step, an int as smdebug's ``hook.step`` is (-1 before the first step).

        Calling it is the step context: ``with hook.step(): ...`` = begin_step() ... end_step(), and
        ``hook.step(global_step)`` jumps ahead as :meth:`begin_step` does.
        """
        return StepNumber(self._steps.current.global_step, self)

    @contextlib.contextmanager
    def _step_context(self, global_step: int | None = None) -> Iterator[int]:
        self.begin_step(global_step)
        try:
            yield self._steps.current.global_step
        finally:
            self.end_step()

    # --- internals -------------------------------------------------------------------------------

    def _ensure_step(self) -> None:
        if not self._in_step:
            self._begin_step(None)

    def _begin_step(self, global_step: int | None) -> None:
        if self._in_step:
            self._end_step()
        if not self._worker_ready:
            self._setup_worker()
        step = self._steps.next(global_step)
        if self._timeline is not None:
            self._timeline.begin(step)
        self._in_step = True
        self._open_current_step(step)
        if self._held:
            self._write_held()

    def _open_current_step(self, step: Step) -> None:
        saved = self.policy.begin_step(step.mode, step.mode_step)
        if saved and not self._checked_empty:
            self._check_empty_collections()
        if self.policy.active:
            self._open_output()

    def _open_output(self) -> None:
        """Open the current step's files (if this worker writes and they are not open yet)."""
        if self._out is not None and not self._out.step_open and self._in_step:
            step = self._steps.current
            self._out.open_step(step.global_step, step.mode, step.mode_step)

    def _refresh_step(self) -> None:
        """Collections changed inside a step: decide the step again (its files may start now)."""
        self._open_current_step(self._steps.current)

    def _end_step(self) -> None:
        if self._timeline is not None:
            self._timeline.end()
        self._in_step = False
        if self._out is not None and self._out.step_open:
            changed, self.policy.names_changed = self.policy.names_changed, False
            self._out.close_step(collections_changed=changed)

    def _fail(self, where: str) -> None:
        if self.failure is None:
            self.failure = sys.exc_info()[1]
        if not self._disabled:
            logger.exception(
                "sdk_ext hook failed in %s (%s); the hook is disabled for the rest of training (training goes on). "
                "Steps completed before this point are intact in %s.",
                where,
                sys.exc_info()[1],
                self.out_dir,
            )
        self._disabled = True
        if self._out is not None:
            with contextlib.suppress(Exception):
                self._out.abort_step()


__all__ = ["HookSteps", "StepNumber", "guarded"]
