"""The model a user wrote, inside the wrappers that distributed training and compilation put around it.

Names (the contract): a parameter is named as the same model is named in a single-process run,
``{ModelClass}_{path}``, whatever wraps it. Path segments that only wrappers add are dropped:
``_fsdp_wrapped_module`` (FSDP1), ``_checkpoint_wrapped_module`` (activation checkpointing's
``checkpoint_wrapper``), ``_orig_mod`` (``torch.compile``). ``FullyShardedDataParallel(Net())``,
``fully_shard(net)`` (which swaps the class for a generated ``FSDPNet``) and ``torch.compile(net)``
are all named ``Net_...``; these are the keys ``model.state_dict()`` gives too. DDP is the one
wrapper kept in names (``DistributedDataParallel_module.fc1.weight``), as smdebug named it, so DDP
trials read as they always did.

What each parameter is (:func:`model_parameters`):

* a plain ``nn.Parameter`` (single process, DDP, or left outside FSDP): saved as it is;
* a DTensor parameter (FSDP2 ``fully_shard``, tensor parallelism, any ``DeviceMesh``): this rank
  holds a block of the logical tensor; for FSDP2 the *sharded* parameter is looked up through FSDP's
  state at each use, so it is right even while FSDP has swapped in the unsharded one;
* an original parameter of an FSDP1 ``FlatParameter`` (either ``use_orig_params`` setting): this
  rank holds a contiguous range of its flattened elements, at an offset of its flat shard.

The last two are :class:`ShardedSource`: where this rank's piece is, which ranks share one copy of
the tensor between them (the shard group), and how to read this rank's piece of the weight and of
its gradient. :mod:`sdk_ext.pytorch.gather` puts the pieces together.

Only modules torch has imported are looked for (``sys.modules``): a model without FSDP or DTensor
imports nothing more here.
"""

from __future__ import annotations

import functools
import logging
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

logger = logging.getLogger(__name__)

#: Path segments only wrappers add (FSDP1, activation checkpointing, torch.compile).
WRAPPER_SEGMENTS = frozenset({"_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"})


def clean_path(path: str) -> str:
    """``path`` without wrapper segments (``_fsdp_wrapped_module.fc1._fsdp_wrapped_module`` -> ``fc1``)."""
    if not path:
        return path
    return ".".join(p for p in path.split(".") if p not in WRAPPER_SEGMENTS)


def _fsdp1_class() -> type | None:
    mod = sys.modules.get("torch.distributed.fsdp.fully_sharded_data_parallel")
    return getattr(mod, "FullyShardedDataParallel", None) if mod is not None else None


def _fsdp2_class() -> type | None:
    mod = sys.modules.get("torch.distributed.fsdp._fully_shard._fully_shard")
    return getattr(mod, "FSDPModule", None) if mod is not None else None


def _dtensor_class() -> type | None:
    mod = sys.modules.get("torch.distributed.tensor._api")
    return getattr(mod, "DTensor", None) if mod is not None else None


#: the classes of the tensors a hook saves most (parameters' data, gradients, activations): never a DTensor
_PLAIN_TENSORS = frozenset((torch.Tensor, nn.Parameter))


def is_dtensor(value: object) -> bool:
    if type(value) in _PLAIN_TENSORS:  # the common case, decided without looking DTensor up
        return False
    cls = _dtensor_class()
    return cls is not None and isinstance(value, cls)


def is_compiled(module: nn.Module) -> bool:
    return type(module).__name__ == "OptimizedModule" and isinstance(getattr(module, "_orig_mod", None), nn.Module)


def is_wrapper(module: nn.Module) -> bool:
    """A module that only wraps another one (FSDP1, checkpoint wrapper, torch.compile): it has no
    name of its own, the module inside is named instead."""
    return _wrapped(module) is not None


def unwrap(module: nn.Module) -> nn.Module:
    """The user's model inside torch.compile, FSDP1 and checkpoint wrappers (DDP is kept)."""
    while True:
        inner = _wrapped(module)
        if inner is None:
            return module
        module = inner


def _wrapped(module: nn.Module) -> nn.Module | None:
    """The module a wrapper (torch.compile, FSDP1, checkpoint wrapper) wraps; None for other modules."""
    for attr in ("_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"):
        inner = getattr(module, attr, None)
        if isinstance(inner, nn.Module) and (attr != "_orig_mod" or is_compiled(module)):
            if attr == "_fsdp_wrapped_module" and not _is_fsdp1(module):
                continue
            return inner
    return None


def _is_fsdp1(module: nn.Module) -> bool:
    cls = _fsdp1_class()
    return cls is not None and isinstance(module, cls)


def model_class_name(module: nn.Module) -> str:
    """The class name the user wrote: ``Net`` for ``fully_shard(Net())`` (whose class is ``FSDPNet``)."""
    cls = type(module)
    fsdp2 = _fsdp2_class()
    index = getattr(cls, "_orig_cls_mro_index", None)
    if fsdp2 is not None and issubclass(cls, fsdp2) and isinstance(index, int) and index < len(cls.__mro__):
        cls = cls.__mro__[index]
    return cls.__name__


def named_modules(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """``(clean path, module)`` for the user's modules (wrapper modules left out; the root's path is "")."""
    for path, module in unwrap(model).named_modules():
        if not is_wrapper(module):
            yield clean_path(path), module


# --- sharded parameters ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Region:
    """The part of a logical tensor one rank holds: a block (start and size per dimension), or with
    ``flat`` a range of its row-major flattened elements (``offsets=(start,)``, ``sizes=(length,)``)."""

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    flat: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.sizes)

    def place(self, full: torch.Tensor, piece: torch.Tensor) -> None:
        """Copy ``piece`` (this region's elements, any shape) into ``full``."""
        if self.flat:
            full.view(-1)[self.offsets[0] : self.offsets[0] + self.sizes[0]] = piece.reshape(-1)
        else:
            index = tuple(slice(o, o + s) for o, s in zip(self.offsets, self.sizes))
            full[index] = piece.reshape(self.sizes)


@dataclass(frozen=True, slots=True)
class ShardedSource:
    """This rank's view of one sharded logical parameter.

    ``region`` is None when this rank holds none of it. ``group`` holds the global ranks that
    together hold one copy (FSDP: its process group; a DTensor: the mesh ranks along its sharded
    dimensions, at this rank's place on the others, so HSDP has one group per replica).
    """

    shape: tuple[int, ...]
    dtype: torch.dtype
    region: Region | None
    group: tuple[int, ...]
    weight: Callable[[], torch.Tensor | None]  # this rank's piece (region's elements)
    grad: Callable[[], torch.Tensor | None]  # this rank's piece of the gradient, None if it has none


@dataclass(frozen=True, slots=True)
class ModelParameter:
    """One parameter as the trial names it: a plain one (``param``) or a sharded one (``sharded``)."""

    name: str  # without the model prefix (``fc1.weight``)
    param: nn.Parameter | None
    sharded: ShardedSource | None


def model_parameters(model: nn.Module) -> list[ModelParameter]:
    """Every parameter of ``model`` once, under its clean path, in ``named_parameters`` order.

    A DTensor parameter whose layout cannot be placed (:func:`dtensor_source`) is left out, with
    a warning naming it.
    """
    root = model
    while is_compiled(root):  # FSDP1 and checkpoint wrappers stay: their paths are cleaned
        root = getattr(root, "_orig_mod")  # noqa: B009 - typed as Tensor | Module on nn.Module
    fsdp2_params = _fsdp2_sharded_params(root)
    flat_owned: set[tuple[int, str]] = set()  # (module id, name) of parameters an FSDP1 flat parameter holds
    found: list[tuple[tuple[int, int], ModelParameter]] = []  # ((module's place, parameter's place), parameter)
    place = {id(m): i for i, m in enumerate(root.modules())}
    seen: set[int] = set()
    for path, module in root.named_modules():
        if _is_fsdp1(module):
            found += [((place.get(owner, 0), i), p) for owner, i, p in _fsdp1_parameters(module, clean_path(path),
                                                                                        flat_owned)]
            continue
        for i, (pname, param) in enumerate(module.named_parameters(recurse=False, remove_duplicate=False)):
            if param is None or id(param) in seen or pname == "_flat_param" or (id(module), pname) in flat_owned:
                continue
            seen.add(id(param))
            name = f"{clean_path(path)}.{pname}" if clean_path(path) else pname
            getter = fsdp2_params.get((id(module), pname))
            if getter is None and is_dtensor(param):
                getter = functools.partial(_same, param)
            if getter is None:
                found.append(((place[id(module)], i), ModelParameter(name, param, None)))
                continue
            try:
                found.append(((place[id(module)], i), ModelParameter(name, None, dtensor_source(getter))))
            except NotImplementedError as err:
                logger.warning("parameter %r is not saved: %s", name, err)
    return [p for _, p in sorted(found, key=lambda item: item[0])]


def _same(value: Any) -> Any:
    return value


def _fsdp2_sharded_params(root: nn.Module) -> dict[tuple[int, str], Callable[[], Any]]:
    """(module id, name) -> a getter of FSDP2's current sharded parameter (its DTensor)."""
    fsdp2 = _fsdp2_class()
    found: dict[tuple[int, str], Callable[[], Any]] = {}
    if fsdp2 is None:
        return found
    for module in root.modules():
        if not isinstance(module, fsdp2):
            continue
        state = getattr(module, "_get_fsdp_state")()  # noqa: B009
        for group in getattr(state, "_fsdp_param_groups", None) or [getattr(state, "_fsdp_param_group", None)]:
            for fsdp_param in getattr(group, "fsdp_params", ()):
                info = fsdp_param._module_info
                found[(id(info.module), info.param_name)] = functools.partial(getattr, fsdp_param, "sharded_param")
    return found


def dtensor_source(get: Callable[[], Any]) -> ShardedSource:
    """A DTensor parameter's piece: the block its local tensor covers, and its shard group.

    Raises:
        NotImplementedError: a placement other than Shard/Replicate (a strided or partial one).
    """
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    dt = get()
    placements = tuple(dt.placements)
    for p in placements:
        if type(p) not in (Shard, Replicate):
            raise NotImplementedError(f"DTensor placement {p} (only Shard and Replicate are gathered)")
    mesh = dt.device_mesh
    shape = tuple(int(s) for s in dt.shape)
    coordinate = mesh.get_coordinate()
    if coordinate is None:  # this rank is not in the tensor's mesh
        return ShardedSource(shape, dt.dtype, None, (), _no_tensor, _no_tensor)
    local_shape, offset = compute_local_shape_and_global_offset(dt.shape, mesh, placements)
    index: list[Any] = [slice(None) if isinstance(p, Shard) else c for p, c in zip(placements, coordinate)]
    group = tuple(sorted(int(r) for r in mesh.mesh[tuple(index)].reshape(-1).tolist()))
    region = Region(tuple(int(o) for o in offset), tuple(int(s) for s in local_shape))

    def weight() -> torch.Tensor:
        return _local(get())

    def grad() -> torch.Tensor | None:
        g = get().grad
        if g is None:
            return None
        return _local(g) if is_dtensor(g) else g

    return ShardedSource(shape, dt.dtype, region if region.numel else None, group, weight, grad)


def _local(dt: Any) -> torch.Tensor:
    """A DTensor's local tensor, as ``to_local()`` gives it without autograd: the tensor itself (a
    view of it for a parameter, in torch 2.13, at a few microseconds per call on every saved step)."""
    local = getattr(dt, "_local_tensor", None)
    if isinstance(local, torch.Tensor):
        return local
    with torch.no_grad():
        result: torch.Tensor = dt.to_local()
    return result


def _no_tensor() -> None:
    return None


def _fsdp1_parameters(unit: nn.Module, unit_path: str,
                      flat_owned: set[tuple[int, str]]) -> list[tuple[int, int, ModelParameter]]:
    """The original parameters of one FSDP1 unit's flat parameter (the unit's own; nested units are
    found on their own), each with the id of the module that owned it and its place there."""
    import torch.distributed as dist

    handle = getattr(unit, "_handle", None)
    if handle is None:
        return []
    flat = handle.flat_param
    for info in list(flat._param_infos) + list(flat._shared_param_infos):
        flat_owned.add((id(info.module), info.param_name))
    sharded = bool(handle.uses_sharded_strategy)
    pg = getattr(unit, "process_group", None)
    group = tuple(sorted(dist.get_process_group_ranks(pg))) if sharded else (dist.get_rank(),)

    def local_flat() -> torch.Tensor:
        local = getattr(flat, "_local_shard", None)
        if local is None or not sharded:
            local = flat.data  # before FSDP's lazy init the data is the shard
        return local  # type: ignore[no-any-return]

    def flat_grad() -> torch.Tensor | None:
        return flat.grad  # type: ignore[no-any-return]

    out: list[tuple[int, int, ModelParameter]] = []
    shard_infos = iter(getattr(flat, "_shard_param_infos", None) or ())
    prefix = f"{unit_path}." if unit_path else ""
    names = iter(zip(flat._fqns, flat._shapes, flat._param_infos))
    offset = 0  # of the parameter in the unsharded flat parameter (NO_SHARD reads it there)
    for numel, padding in zip(flat._numels_with_padding, flat._is_padding_mask):
        offset += numel
        if padding:
            continue
        fqn, shape, origin = next(names)
        region: Region | None
        if sharded:
            info = next(shard_infos)
            if info.in_shard:
                start, length = int(info.offset_in_shard), int(info.numel_in_shard)
                region = Region((int(info.intra_param_start_idx),), (length,), flat=True)
            else:
                start, length, region = 0, 0, None
        else:  # NO_SHARD: every rank holds all of it
            start, length = offset - numel, numel
            region = Region((0,), (numel,), flat=True)
        weight, grad = _flat_slice(local_flat, start, length), _flat_slice(flat_grad, start, length)
        out.append((id(origin.module), len(out), ModelParameter(  # flattened in registration order
            prefix + clean_path(fqn), None, ShardedSource(tuple(shape), flat.dtype, region, group, weight, grad))))
    return out


def _flat_slice(get: Callable[[], torch.Tensor | None], start: int, length: int) -> Callable[[], Any]:
    def piece() -> torch.Tensor | None:
        t = get()
        return None if t is None else t[start : start + length]

    return piece


__all__ = [
    "WRAPPER_SEGMENTS",
    "ModelParameter",
    "Region",
    "ShardedSource",
    "clean_path",
    "dtensor_source",
    "is_compiled",
    "is_dtensor",
    "is_wrapper",
    "model_class_name",
    "model_parameters",
    "named_modules",
    "unwrap",
]
