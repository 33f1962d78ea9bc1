"""SIGTERM ends training with the open step written, as a normal exit would.

A stop (StopTrainingJob, a rule's StopTraining action, ``MaxRuntimeInSeconds``) reaches the training
process as SIGTERM, whose default action ends the process at once: no ``atexit``, so the hooks' step in
progress (a framework hook closes a step when the next one starts) was lost. A stalled script trained
step 19 and the trial ended at step 18.

:func:`watch` installs a handler for SIGTERM, once, in the process that created the first hook, from
the main thread, and only if SIGTERM still has its default action (a script's own handler is left
alone, and a handler the script installs later replaces this one). The handler closes every live hook
(which finishes the open step and writes the collections file) and then dies of SIGTERM exactly as
before: the default action restored and the signal sent again, so the exit status is still
"killed by SIGTERM" and nothing else of the script (its ``finally`` blocks, ``atexit``) runs that would
not have run before.

A signal handler runs on the main thread between two bytecodes, possibly in the middle of a hook
method. The handler looks at the interrupted stack: when a hook entry point (a code object in
:data:`ENTRY_POINTS`) is on it, the signal is held (:data:`pending`) and the outermost entry point
finishes the work as it returns (:func:`leaving`); a timer sends the signal again shortly after, in case
the entry point was past its check already. So a hook is never closed half-way through a step, and the
hooks pay nothing for this while no SIGTERM is pending (one global read per call). A forked child (a data
loader worker) inherits the handler but not the hooks: there the handler only dies of SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import weakref
from types import CodeType, FrameType
from typing import Any, Protocol

logger = logging.getLogger(__name__)

RETRY_SECONDS = 0.05  # a held SIGTERM is sent again after this long, if no entry point finished it


class _Closable(Protocol):
    def close(self) -> None: ...


#: Code objects of the hooks' entry points (the ``guarded`` wrapper, ``Hook.close``): a SIGTERM that
#: arrives while one of them runs waits until it returns.
ENTRY_POINTS: set[CodeType] = set()
#: The held signal, while one is (read by the entry points as they return; None almost always).
pending: int | None = None

_lock = threading.Lock()  # guards _installed_in and _hooks
_hooks: weakref.WeakSet[Any] = weakref.WeakSet()
_installed_in: int | None = None  # the pid whose handler this is


def watch(hook: _Closable) -> bool:
    """Close ``hook`` when SIGTERM ends this process. Returns whether the handler is (now) in place."""
    global _installed_in
    with _lock:
        _hooks.add(hook)
        if _installed_in == os.getpid():
            return signal.getsignal(signal.SIGTERM) is _on_sigterm
        if threading.current_thread() is not threading.main_thread():
            return False  # only the main thread may set handlers; the process keeps SIGTERM's default
        try:
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
                return False  # the script (or its framework) handles SIGTERM itself
            signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):  # not the main interpreter, or no signals here
            return False
        _installed_in = os.getpid()
        return True


def leaving(frame: FrameType | None) -> None:
    """An entry point (whose frame is ``frame``) returns while a SIGTERM is held: finish now, unless
    another entry point is still running below it."""
    if pending is not None and not _inside(frame.f_back if frame is not None else None):
        _finish(pending)


def _inside(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code in ENTRY_POINTS:
            return True
        frame = frame.f_back
    return False


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    global pending
    if _installed_in != os.getpid():  # a forked child: it has no hooks of its own to close
        _die(signum)
    if _inside(frame):
        pending = signum
        retry = threading.Timer(RETRY_SECONDS, os.kill, (os.getpid(), signum))
        retry.daemon = True
        retry.start()
        return
    _finish(signum)


def _finish(signum: int) -> None:
    global pending
    pending = None
    with _lock:
        hooks = list(_hooks)
    for hook in hooks:
        try:
            hook.close()  # never raises; logs its own failure
        except Exception:  # noqa: BLE001 - whatever happens, the process must still end
            logger.exception("sdk_ext: closing the hook on SIGTERM failed")
    _die(signum)


def _die(signum: int) -> None:
    """End the process by ``signum``'s default action, as if no handler had been installed."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})  # in case the signal was blocked: deliver it now


__all__ = ["ENTRY_POINTS", "leaving", "pending", "watch"]
