"""No module reaches into another module's underscore names (docs/ARCHITECTURE.md#what-each-part-may-import: each
module can be read and changed on its own).

Every module of sdk_ext/, lambda/, rules/ and infra/ is parsed with ``ast`` and these are reported:

- ``from <project module> import _name`` (absolute or relative), and imports of a private project module;
- ``alias._name`` where ``alias`` was bound by an import (a module, or an object another module defined);
- ``obj._name`` for any other ``obj`` except ``self``, ``cls`` and ``super()``, unless ``_name`` is a member
  that a class of the same module defines (a method, a class attribute or ``self._name = ...``): then it is
  the module's own state, e.g. ``other._modes`` in ``__eq__`` or a writer class calling its storage's helper;
- ``getattr``/``setattr``/``hasattr``/``delattr`` with a constant underscore name, under the same rule.

Dunder names are not private. Deliberate exceptions are listed below, each with its reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("sdk_ext", "lambda", "rules", "infra")
# Modules imported as top-level names: lambda/ and rules/ files run with their own directory on sys.path.
TOP_LEVEL_DIRS = ("lambda", "rules")

GENERATED = {
    "sdk_ext/format/event_pb2.py": "protoc's output (its header says: do not edit); it uses protobuf's internals "
                                   "as every generated _pb2 module does, and is regenerated, never hand-written",
}

# Underscore names that are someone's public contract; any module may use them.
ALLOWED_NAMES = {
    "_to_request_dict": "SageMaker SDK v2's Debugger config objects serialize with it and the v2 Estimator calls "
                        "it from another module; sdk_ext.debugger keeps the name for drop-in parity",
    "_to_profiler_disabled_request_dict": "v2's ProfilerConfig classmethod that Estimator.disable_profiling calls; "
                                          "kept for drop-in parity",
    "_get_worker_name": "smdebug's Hook API that framework hooks and users call (smdebug 1.0.34 names it so)",
    "_cleanup": "smdebug's Hook API that the Keras/TF hooks call at the end of training (smdebug 1.0.34)",
    "_module_name": "smdebug's PyTorch hook names each registered module with this attribute, and hook "
                    "subclasses written for smdebug read it (module._module_name) in their forward_hook",
    "_replace": "namedtuple's public API (the underscore only avoids clashes with field names)",
    "_asdict": "namedtuple's public API (as _replace)",
    "_fields": "namedtuple's public API (as _replace)",
    "_make": "namedtuple's public API (as _replace)",
}

# One use in one file: (path, the code as ast.unparse writes it) -> reason.
ALLOWED = {
    ("sdk_ext/rules/time_limit.py", "os._exit"): "the standard library's documented way to end the process at "
                                                 "once, without cleanup handlers that a stuck rule could block",
    ("sdk_ext/local/jobs/keeper.py", "os._exit"): "a forked child that failed to exec must end at once, without "
                                                 "running the keeper's own cleanup (the documented use of _exit)",
    ("sdk_ext/pytorch/zero_change.py", "torch.nn.modules.loss._Loss"): "the base class of every PyTorch loss "
                                                                        "module; torch has no public name for it "
                                                                        "(smdebug's own check uses it too)",
    ("sdk_ext/pytorch/hook.py", "getattr(module, '_orig_mod')"): "torch.compile's OptimizedModule exposes the "
                                                                 "module it wraps only under this name",
    ("sdk_ext/keras/capture.py", "getattr(optimizer, '_trainable_variables')"): "Keras 3's optimizer keeps the "
        "variables it was built for only under this name; read (with a default) when apply() is called without them",
    ("sdk_ext/keras/names.py", "getattr(optimizer, '_trainable_variables')"): "the same Keras 3 attribute: the "
        "variables an optimizer updates, which its slots (Adam's m, v) are named after; only the rest is its own state",
    ("sdk_ext/keras/tape.py", "getattr(tape, '_push_tape')"): "tf.GradientTape starts recording in this method "
        "(entered by `with tape:`); wrapping it is how a custom loop's step begins, as smdebug's wrap_tape did",
    ('sdk_ext/pytorch/hook.py', "getattr(torch._C, '_current_graph_task_id')"):
        'the only way to tell that a forward runs inside backward (activation checkpointing recomputing it, which must not be saved twice); read with a default',
    ('sdk_ext/pytorch/hook.py', 'torch._C'):
        "as the line above: torch._C is where torch keeps the autograd engine's state",
    ('sdk_ext/pytorch/hook.py', 'torch.autograd.Variable._execution_engine'):
        "queue_callback, to run code when a backward ends (after FSDP's own end-of-backward callback finishes the gradients), is only reachable here; FSDP1 and FSDP2 use the same call",
    ('sdk_ext/pytorch/wrappers.py', "getattr(root, '_orig_mod')"):
        "torch.compile's OptimizedModule exposes the module it wraps only under this name",
    ('sdk_ext/pytorch/wrappers.py', "getattr(module, '_orig_mod')"):
        'as above (telling a compiled wrapper from other modules)',
    ('sdk_ext/pytorch/wrappers.py', "getattr(dt, '_local_tensor')"):
        "a DTensor's local tensor: to_local() returns this very object when autograd is off (torch documents the "
        "identity), but for a Parameter it makes a fresh view per call in torch 2.13 (3-8 us per saved piece and "
        "step, on every rank); read with a default, to_local() under no_grad when it is not there",
    ('sdk_ext/pytorch/wrappers.py', "getattr(unit, '_handle')"):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', "getattr(flat, '_local_shard')"):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', 'flat._numels_with_padding'):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', 'flat._is_padding_mask'):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', 'flat._param_infos'):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', 'flat._shared_param_infos'):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', "getattr(flat, '_shard_param_infos')"):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', 'flat._fqns'):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', 'flat._shapes'):
        "FSDP1 (FullyShardedDataParallel) exposes no public way to find which elements of which original parameter a rank holds; its FlatParameter's metadata is the only source (torch's own state-dict code reads the same fields); read only when a model wrapped in FSDP1 is registered",
    ('sdk_ext/pytorch/wrappers.py', "getattr(module, '_get_fsdp_state')"):
        "FSDP2 (fully_shard) exposes no public way to reach the sharded parameter while it has swapped the unsharded one into the module (during forward/backward); its state's parameter list is the only source",
    ('sdk_ext/pytorch/wrappers.py', "getattr(state, '_fsdp_param_groups')"):
        "FSDP2 (fully_shard) exposes no public way to reach the sharded parameter while it has swapped the unsharded one into the module (during forward/backward); its state's parameter list is the only source",
    ('sdk_ext/pytorch/wrappers.py', "getattr(state, '_fsdp_param_group')"):
        "FSDP2 (fully_shard) exposes no public way to reach the sharded parameter while it has swapped the unsharded one into the module (during forward/backward); its state's parameter list is the only source (its name in torch releases before the list)",
    ('sdk_ext/pytorch/wrappers.py', 'fsdp_param._module_info'):
        "FSDP2 (fully_shard) exposes no public way to reach the sharded parameter while it has swapped the unsharded one into the module (during forward/backward); its state's parameter list is the only source",
}



@dataclass(frozen=True)
class Reach:
    path: str
    line: int
    code: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _project_tops(root: Path) -> frozenset[str]:
    tops = {"sdk_ext", "infra"}
    for directory in TOP_LEVEL_DIRS:
        tops.update(p.stem for p in (root / directory).glob("*.py"))
    return frozenset(tops)


def _module_name(rel: str) -> str:
    parts = rel[: -len(".py")].split("/")
    if parts[0] in TOP_LEVEL_DIRS:
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _members(tree: ast.Module) -> set[str]:
    """Names a class of this module defines: methods, class attributes, ``self.x``/``cls.x`` assignments."""
    members: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                members.add(item.name)
            elif isinstance(item, ast.Assign):
                members.update(t.id for t in item.targets if isinstance(t, ast.Name))
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                members.add(item.target.id)
        for node in ast.walk(cls):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                members.add(node.attr)
    return members


def _imported_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def _is_own(value: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object's own (or inherited) state."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super"


def _root(value: ast.expr) -> ast.expr:
    while isinstance(value, ast.Attribute):
        value = value.value
    return value


def scan(source: str, rel: str, project: frozenset[str]) -> Iterator[Reach]:
    """The underscore reaches of one module (``rel``: its path under the repository root)."""
    tree = ast.parse(source, filename=rel)
    module = _module_name(rel)
    members, imported = _members(tree), _imported_names(tree)

    def foreign(value: ast.expr, name: str) -> bool:
        if _is_own(value):
            return False
        root = _root(value)
        if isinstance(root, ast.Name) and root.id in imported:
            return True  # a module, or an object another module defined
        return name not in members

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, rel.endswith("__init__.py"))
            if target.split(".")[0] not in project:
                continue
            if any(_private(part) for part in target.split(".")):
                yield Reach(rel, node.lineno, ast.unparse(node))
                continue
            for alias in node.names:
                if _private(alias.name):
                    yield Reach(rel, node.lineno, f"from {target} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in project and any(_private(p) for p in parts):
                    yield Reach(rel, node.lineno, f"import {alias.name}")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if node.attr not in ALLOWED_NAMES and foreign(node.value, node.attr):
                yield Reach(rel, node.lineno, ast.unparse(node))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value) \
                    and name.value not in ALLOWED_NAMES and foreign(node.args[0], name.value):
                yield Reach(rel, node.lineno, f"{node.func.id}({ast.unparse(node.args[0])}, {name.value!r})")


def _modules(root: Path) -> Iterable[str]:
    for directory in SCANNED:
        for path in sorted((root / directory).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if "__pycache__" not in rel and "/node_modules/" not in rel and rel not in GENERATED:
                yield rel


def _all_reaches() -> list[Reach]:
    project = _project_tops(ROOT)
    return [r for rel in _modules(ROOT) for r in scan((ROOT / rel).read_text(encoding="utf-8"), rel, project)]


def test_no_module_reaches_into_another_modules_underscore_names() -> None:
    exempt = ALLOWED.keys()
    found = [r for r in _all_reaches() if (r.path, r.code) not in exempt]
    assert not found, (
        "these use another module's underscore name; give the owning class a public method or property for "
        "what its neighbour needs (or, for someone else's public contract, add it to ALLOWED with the reason):\n"
        + "\n".join(map(str, found)))


def test_every_exception_is_still_needed() -> None:
    used = {(r.path, r.code) for r in _all_reaches()}
    stale = sorted(ALLOWED.keys() - used)
    assert not stale, f"these allow-list entries match nothing any more; remove them: {stale}"


def test_every_exception_says_why() -> None:
    for reason in [*ALLOWED_NAMES.values(), *ALLOWED.values(), *GENERATED.values()]:
        assert len(reason.split()) >= 4


# --- the scanner itself ---------------------------------------------------------------------------------

PROJECT = frozenset({"sdk_ext", "auto_stop_policy"})


def _codes(source: str, rel: str = "sdk_ext/pkg/mod.py") -> list[str]:
    return [r.code for r in scan(source, rel, PROJECT)]


@pytest.mark.parametrize(("source", "expected"), [
    ("from sdk_ext.trials.tensor import _mode, Tensor", ["from sdk_ext.trials.tensor import _mode"]),
    ("from .tensor import _mode", ["from sdk_ext.pkg.tensor import _mode"]),
    ("from .. import _x", ["from sdk_ext import _x"]),
    ("from auto_stop_policy import _string", ["from auto_stop_policy import _string"]),
    ("from sdk_ext._private import thing", ["from sdk_ext._private import thing"]),
    ("import sdk_ext.pkg._impl", ["import sdk_ext.pkg._impl"]),
    ("from sdk_ext.hooks import collections as c\nc._CHANGES += 1", ["c._CHANGES"]),
    ("import sdk_ext.hooks.collections\nx = sdk_ext.hooks.collections._CHANGES",
     ["sdk_ext.hooks.collections._CHANGES"]),
    ("from sdk_ext.x import Trial\nTrial._cache = {}", ["Trial._cache"]),
    ("class W:\n    def f(self):\n        return self.writer._path", ["self.writer._path"]),
    ("def f(rule):\n    rule._actions = 1", ["rule._actions"]),
    ("def f(trial):\n    return trial._index.get(1)", ["trial._index"]),
    ("def f(rule):\n    return getattr(rule, '_actions', None)", ["getattr(rule, '_actions')"]),
    ("def f(t):\n    setattr(t, '_ahead', 3)", ["setattr(t, '_ahead')"]),
    ("from typing import NamedTuple\ndef f(p):\n    return p._replace(x=1)._asdict()", []),
    ("from sdk_ext.x import Thing\nclass C(Thing):\n    def f(self):\n        return super()._g() + self._h + cls._k", []),
    ("class S:\n    __slots__ = ('_modes',)\n    def __eq__(self, other):\n        return self._modes == other._modes\n"
     "    def __init__(self):\n        self._modes = {}", []),
    ("class Store:\n    def _put(self, k): pass\nclass Writer:\n    def close(self):\n        self._store._put(1)", []),
    ("def f(x):\n    return x.__dict__, x.__class__", []),
])
def test_the_scanner_finds_each_kind_of_reach(source: str, expected: list[str]) -> None:
    assert _codes(source) == expected


def test_the_scanner_ignores_underscore_imports_from_other_libraries() -> None:
    assert _codes("from google.protobuf import _internal\nfrom os import _exit") == []
    assert _codes("import os\nos._exit(1)") == ["os._exit"]  # but using them is reported (then allow-listed)


def test_a_top_level_lambda_module_resolves_relative_to_its_directory() -> None:
    assert _module_name("lambda/auto_stop.py") == "auto_stop"
    assert _module_name("sdk_ext/trials/__init__.py") == "sdk_ext.trials"
    assert _codes("from . import _x", "sdk_ext/pkg/__init__.py") == ["from sdk_ext.pkg import _x"]
