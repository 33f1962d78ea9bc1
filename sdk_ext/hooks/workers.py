"""Which worker a process is, where the framework itself cannot say: launchers' and TensorFlow's environment.

A hook names its process ``worker_{rank}`` (docs/FORMAT.md#workers). Frameworks that know their rank say it first
(``torch.distributed``, ``xgb.collective``, ``jax.process_index()``); these are the other sources, in order:

* ``TF_CONFIG`` (TensorFlow's multi-worker strategies; SageMaker's TensorFlow container sets it per host):
  the ``chief`` is rank 0 and ``worker`` task *i* follows the chiefs; a ``ps`` or ``evaluator`` task has no
  training rank (None, and the caller says so).
* a launcher's variables: ``RANK``/``WORLD_SIZE`` (torchrun and sdk_ext's local launcher),
  ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE`` (Open MPI's mpirun), ``PMI_RANK``/``PMI_SIZE`` (MPICH,
  Intel MPI).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

_LAUNCHER_VARIABLES = (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                       ("PMI_RANK", "PMI_SIZE"))
TRAINING_TASKS = ("chief", "master", "worker")


def launcher_rank(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """(rank, world size) from a launcher's environment, or None when no launcher set one."""
    for rank_key, size_key in _LAUNCHER_VARIABLES:
        rank, size = environ.get(rank_key), environ.get(size_key)
        if rank is None or size is None:
            continue
        try:
            r, s = int(rank), int(size)
        except ValueError:
            continue
        if 0 <= r < s:
            return r, s
    return None


def tf_config_task(environ: Mapping[str, str]) -> tuple[str, int, dict[str, list[str]]] | None:
    """(task type, task index, cluster) from ``TF_CONFIG``; None when unset or not a multi-worker config."""
    text = environ.get("TF_CONFIG")
    if not text:
        return None
    try:
        config = json.loads(text)
        cluster = {str(k): list(v) for k, v in (config.get("cluster") or {}).items()}
        task = config.get("task") or {}
        return str(task.get("type", "")), int(task.get("index", 0)), cluster
    except (ValueError, TypeError, AttributeError):
        return None


def tf_config_rank(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """(rank, world size) of a TensorFlow multi-worker task: chiefs first, then workers; None for a task
    that does not train (``ps``, ``evaluator``) or no TF_CONFIG."""
    found = tf_config_task(environ)
    if found is None:
        return None
    task_type, index, cluster = found
    order = [(t, i) for t in TRAINING_TASKS for i in range(len(cluster.get(t, [])))]
    if (task_type, index) not in order:
        return None
    return order.index((task_type, index)), len(order)


def environment_rank(environ: Mapping[str, str]) -> tuple[int, int] | None:
    """The first of :func:`tf_config_rank` and :func:`launcher_rank` that knows."""
    return tf_config_rank(environ) or launcher_rank(environ)


__all__ = ["environment_rank", "launcher_rank", "tf_config_rank", "tf_config_task"]
