"""The process's hook: one hook per training process, shared by every way of getting one.

A training script may get its hook explicitly (``Hook(...)``, ``Hook.create_from_json_file()``,
``sdk_ext.pytorch.get_hook(create_if_not_exists=True)``) while the zero-change path
(``python -m sdk_ext.pytorch.run``, or the ``.pth`` install) also arms one. As with smdebug's
``get_hook`` singleton, they all end up with the same hook, so a trial has one writer:

* every hook becomes the process's hook when it is constructed (the newest wins, as smdebug's
  ``set_hook`` in the hook constructor); a closed hook stops being it;
* ``create_from_json_file`` returns the process's hook when that hook was created from the same
  configuration file (and is of the class asked for, or a subclass), instead of a second one;
* the zero-change path uses the process's hook when there is one, and creates it otherwise.

A second live hook writing the same ``out_dir`` is logged as a warning: two writers of one trial
write every step twice.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sdk_ext.hooks.hook import Hook

logger = logging.getLogger(__name__)

#: Guards _current; reentrant, since creating a hook under it registers the hook.
lock = threading.RLock()
_current: Hook | None = None


def current() -> Hook | None:
    """The process's hook, or None (none yet, or it was closed)."""
    with lock:
        hook = _current
        if hook is not None and hook.closed:
            return None
        return hook


def register(hook: Hook) -> None:
    """Make ``hook`` the process's hook (the hook constructor calls this)."""
    global _current
    with lock:
        previous = current()
        if previous is not None and previous is not hook and not previous.dry_run and not hook.dry_run \
                and previous.out_dir == hook.out_dir:
            logger.warning(
                "a second sdk_ext hook now writes the trial %s in this process; both will save every step. Use one "
                "hook: Hook.create_from_json_file() and sdk_ext.pytorch.get_hook() return the hook that exists",
                hook.out_dir,
            )
        _current = hook


def forget(hook: Hook | None = None) -> None:
    """Stop ``hook`` (any hook, if None) being the process's hook."""
    global _current
    with lock:
        if hook is None or _current is hook:
            _current = None


def same_config_file(hook: Hook, path: str | os.PathLike[str]) -> bool:
    """Whether ``hook`` was created from the configuration file at ``path``."""
    return hook.config_file is not None and hook.config_file == os.path.realpath(path)


__all__ = ["current", "forget", "lock", "register", "same_config_file"]
