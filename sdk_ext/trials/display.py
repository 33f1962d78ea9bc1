"""Trials and tensors in a notebook: an HTML summary (``_repr_html_``) and a tensor's values as rows or a
pandas DataFrame (pandas is optional: ``pip install pandas``).

    trial = create_trial("sdk-ext-jobs/mnist-1/output/tensors")
    trial                                   # in Jupyter: steps, modes, workers, collections, tensors
    trial.tensor("gradient/fc1.weight")     # its steps and the last value's statistics
    trial.tensor("loss").to_dataframe()     # one row per step: step, mode, mode_step, value (or statistics)

Mixins over the public queries of :class:`~sdk_ext.trials.Trial` and :class:`~sdk_ext.trials.Tensor`,
so that display needs nothing from their insides. A value that cannot be read becomes a row with its
error, never an exception from a notebook's display.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

import numpy as np

from sdk_ext.exceptions import SdkExtError
from sdk_ext.modes import ModeKeys

MAX_LISTED = 20  # tensors / steps listed in an HTML summary before "... and N more"


def value_stats(value: Any) -> dict[str, Any]:
    """A value as a row's columns: ``value`` for one element, else shape, dtype and (numeric) statistics."""
    array = np.asarray(value)
    if array.size == 1:
        item = array.reshape(-1)[0]
        return {"value": item.item() if hasattr(item, "item") else item}
    row: dict[str, Any] = {"shape": tuple(array.shape), "dtype": str(array.dtype)}
    if array.size and np.issubdtype(array.dtype, np.number) and not np.issubdtype(array.dtype, np.complexfloating):
        as_float = array.astype(np.float64, copy=False)
        finite = as_float[np.isfinite(as_float)]
        row.update(nan=int(np.isnan(as_float).sum()), inf=int(np.isinf(as_float).sum()),
                   zeros=int((as_float == 0).sum()))
        if finite.size:
            row.update(min=float(finite.min()), max=float(finite.max()), mean=float(finite.mean()),
                       l2=float(np.linalg.norm(finite)))
    return row


def _table(rows: Iterable[tuple[str, str]]) -> str:
    body = "".join(f'<tr><th style="text-align:left;padding-right:12px">{escape(k)}</th>'
                   f'<td style="text-align:left">{v}</td></tr>' for k, v in rows)
    return f"<table>{body}</table>"


def _listed(names: list[str]) -> str:
    shown = ", ".join(escape(n) for n in names[:MAX_LISTED])
    return shown + (f" ... and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")


class TrialDisplay:
    """``_repr_html_`` for a Trial (uses ``path``, ``steps``, ``mode``, ``workers``, ``collections``,
    ``tensor_names``)."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        trial: Any = self
        try:
            steps = trial.steps()
            modes: dict[str, int] = {}
            for step in steps:
                mode = trial.mode(step)
                key = mode.name if isinstance(mode, ModeKeys) else "unknown"
                modes[key] = modes.get(key, 0) + 1
            names = sorted(trial.tensor_names())
            collections = {n: len(c.tensor_names) for n, c in sorted(trial.collections().items())}
            workers = trial.workers()
        except (SdkExtError, OSError) as err:
            return f"<p><b>Trial</b> {escape(str(trial.path))}: cannot be read: {escape(str(err))}</p>"
        span = f"{len(steps)} ({steps[0]} to {steps[-1]})" if steps else "none yet"
        return "<div><b>sdk_ext Trial</b>" + _table([
            ("path", escape(str(trial.path))), ("steps", escape(span)),
            ("modes", escape(", ".join(f"{m}: {n}" for m, n in modes.items()) or "none")),
            ("workers", escape(", ".join(workers) or "none")),
            ("collections", escape(", ".join(f"{n} ({k})" for n, k in collections.items() if k) or "none")),
            (f"tensors ({len(names)})", _listed(names) or "none"),
        ]) + "</div>"


class TensorDisplay:
    """``_repr_html_``, :meth:`rows` and :meth:`to_dataframe` for a Tensor (uses ``name``, ``trial``,
    ``steps``, ``value``)."""

    __slots__ = ()

    def rows(self, mode: ModeKeys = ModeKeys.GLOBAL, steps: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """One dict per saved step (of ``mode``; only ``steps`` if given): ``step``, ``mode``, ``mode_step``,
        ``global_step``, then :func:`value_stats` of the value, or ``error`` if it cannot be read."""
        tensor: Any = self
        trial = tensor.trial
        wanted = None if steps is None else set(steps)
        out = []
        for step in tensor.steps(mode=mode):
            if wanted is not None and step not in wanted:
                continue
            if mode is ModeKeys.GLOBAL:
                global_step = step
                step_mode, mode_step = trial.mode_modestep(step)
            else:
                global_step, step_mode, mode_step = trial.global_step(mode, step), mode, step
            row: dict[str, Any] = {"step": step, "global_step": global_step,
                                   "mode": step_mode.name if isinstance(step_mode, ModeKeys) else None,
                                   "mode_step": mode_step}
            try:
                row.update(value_stats(tensor.value(step, mode=mode)))
            except SdkExtError as err:
                row["error"] = str(err)
            out.append(row)
        return out

    def to_dataframe(self, mode: ModeKeys = ModeKeys.GLOBAL, steps: Iterable[int] | None = None) -> Any:
        """:meth:`rows` as a ``pandas.DataFrame`` indexed by step.

        Raises:
            ImportError: pandas is not installed (the message says how to install it).
        """
        try:
            import pandas as pd  # type: ignore[import-untyped,unused-ignore]
        except ImportError as err:
            raise ImportError("Tensor.to_dataframe needs pandas: pip install pandas "
                              "(Tensor.rows() gives the same rows as dicts without it)") from err
        return pd.DataFrame(self.rows(mode=mode, steps=steps)).set_index("step")

    def _repr_html_(self) -> str:
        tensor: Any = self
        try:
            steps = tensor.steps()
            last = value_stats(tensor.value(steps[-1])) if steps else {}
        except (SdkExtError, OSError) as err:
            return f"<p><b>Tensor</b> {escape(tensor.name)}: cannot be read: {escape(str(err))}</p>"
        span = f"{len(steps)} ({steps[0]} to {steps[-1]})" if steps else "none"
        rows = [("tensor", escape(tensor.name)), ("trial", escape(str(tensor.trial.path))), ("steps", escape(span))]
        if steps:
            rows.append((f"at step {steps[-1]}", escape(", ".join(f"{k} {v}" for k, v in last.items()))))
        return "<div><b>sdk_ext Tensor</b>" + _table(rows) + "</div>"


__all__ = ["MAX_LISTED", "TensorDisplay", "TrialDisplay", "value_stats"]
