"""ReplicaDivergence: replicas that should hold identical weights drift apart (sdk_ext's own rule).

Data-parallel training keeps one copy of the weights per replica (each DDP worker; each replica group
of HSDP) and keeps them identical by applying the same reduced gradient everywhere. A replica that
drifts (a rank that skipped an all-reduce, applied its update twice, loaded another checkpoint, or
whose memory was corrupted) trains on from different weights, and nothing else notices: the loss of
the other ranks looks fine. No SageMaker rule checks this.

At each step, for each selected tensor saved by two or more workers (the job saves with
``include_workers="all"``), every worker's value is compared with the value most workers hold (on a
tie, the group that holds worker_0's). Two values agree when their shapes match and

    max |a - b| <= atol + rtol * max |b|

(tolerances scaled by the tensor's magnitude, not element by element: near-zero elements do not make
an update look like drift). The rule fires on the first tensor, at the first step, where a worker
disagrees, naming the worker, the tensor, the largest difference and where it is.

Parameters: ``collection_names`` (default ``weights,biases``; never gradients, which differ per
worker before the all-reduce), ``tensor_regex``, ``rtol`` (1e-5), ``atol`` (1e-8).
A sharded model (FSDP, HSDP) is written as logical tensors (docs: README, "Sharded and distributed
PyTorch"): under ``include_workers="all"`` each worker writes its replica's copy, so HSDP replicas
are compared; plain FSDP has one copy, which every worker writes alike. With one worker saving
(``include_workers="one"``) there is nothing to compare, and the rule says so instead of passing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sdk_ext.rules.builtin.base import MISSING, BuiltinRule, fmt, is_numeric


def _agree(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    if a.shape != b.shape:
        return False
    if a.size == 0:
        return True
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    scale = float(np.max(np.abs(b.astype(np.float64))))
    return bool(np.all(diff <= atol + rtol * scale) or np.array_equal(a, b, equal_nan=True))


def replica_groups(values: Mapping[str, np.ndarray], *, rtol: float, atol: float) -> list[list[str]]:
    """Workers grouped by agreeing values (each compared with the first worker of a group), the
    reference group first: the largest, on a tie the one holding the first worker (sorted order)."""
    groups: list[list[str]] = []
    for worker in sorted(values):
        for group in groups:
            if _agree(values[worker], values[group[0]], rtol, atol):
                group.append(worker)
                break
        else:
            groups.append([worker])
    groups.sort(key=lambda g: -len(g))  # stable: among equal sizes, the group found first stays first
    return groups


def describe_difference(value: np.ndarray, reference: np.ndarray) -> str:
    """Where and how much ``value`` differs from ``reference`` (same shape), for a message."""
    if value.shape != reference.shape:
        return f"shape {value.shape} instead of {reference.shape}"
    diff = np.abs(value.astype(np.float64) - reference.astype(np.float64))
    if not np.isfinite(diff).all():
        bad = np.unravel_index(int(np.argmax(~np.isfinite(diff))), diff.shape)
        return f"a non-finite difference at index {tuple(int(i) for i in bad)} ({value[bad]} vs {reference[bad]})"
    at = np.unravel_index(int(np.argmax(diff)), diff.shape)
    return (f"max |difference| {fmt(float(diff[at]))} at index {tuple(int(i) for i in at)} "
            f"({fmt(float(value[at]))} vs {fmt(float(reference[at]))})")


class ReplicaDivergence(BuiltinRule):
    """Fires when a worker's copy of a replicated tensor differs from the other replicas'."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: str | list[str] | None = "weights,biases",
        tensor_regex: str | list[str] | None = None,
        rtol: float | str = 1e-5,
        atol: float | str = 1e-8,
        *,
        action_str: str = "",
    ) -> None:
        super().__init__(base_trial, action_str=action_str)
        self.collection_names = self.params.strings("collection_names", collection_names)
        self.tensor_regex = self.params.regexes("tensor_regex", tensor_regex)
        self.rtol = self.params.number("rtol", rtol, ge=0)
        self.atol = self.params.number("atol", atol, ge=0)
        self.params.done()
        self.compared = 0  # (tensor, step) pairs that two or more workers saved

    def coverage_note(self) -> str | None:
        note = super().coverage_note()
        if note is not None or self.compared:
            return note
        return (f"the rule matched {len(self.checked)} tensors, but each was saved by one worker only, so no "
                "replicas could be compared; save with include_workers='all' (HookParameters include_workers: "
                "all) so that every worker writes its copy")

    def _worker_values(self, name: str, step: int) -> dict[str, np.ndarray]:
        try:
            tensor = self.base_trial.tensor(name)
            workers = tensor.workers(step)
        except MISSING:
            return {}
        values = {}
        for worker in workers:
            try:
                value = np.asarray(tensor.value(step, worker=worker))
            except MISSING:
                continue
            if is_numeric(value):
                values[worker] = value
        return values

    def invoke_at_step(self, step: int) -> bool:
        for name in self.select(step, collections=self.collection_names, regex=self.tensor_regex):
            values = self._worker_values(name, step)
            if len(values) < 2:
                continue
            self.compared += 1
            groups = replica_groups(values, rtol=self.rtol, atol=self.atol)
            if len(groups) == 1:
                continue
            reference = groups[0]
            diverged = sorted(w for g in groups[1:] for w in g)
            worst = max(diverged, key=lambda w: _distance(values[w], values[reference[0]]))
            return self.found_issue(
                f"replicas diverged at step {step}: {worst}'s {name!r} differs from {reference[0]}'s: "
                f"{describe_difference(values[worst], values[reference[0]])}; tolerance atol {fmt(self.atol)} + "
                f"rtol {fmt(self.rtol)} x max|value|. Workers agreeing: {', '.join(reference)}; "
                f"diverged: {', '.join(diverged)}"
            )
        return False


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return float(np.nanmax(d)) if np.isfinite(d).any() else float("inf")


__all__ = ["ReplicaDivergence", "describe_difference", "replica_groups"]
