"""Wrapped models in one process (a 1-rank gloo group): the trial names each parameter as the unwrapped
model is named and holds the same values, step for step (multi-rank jobs: test_sharded.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch import nn

from sdk_ext.pytorch import Hook, SaveConfig
from sdk_ext.pytorch.wrappers import clean_path, model_class_name, model_parameters, unwrap
from tests.trial_dump import decode_value_json, dump_with_format

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "fsdp_train"))
import train as example  # noqa: E402


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def trained(out: Path, how: Callable[[nn.Module], nn.Module], steps: int = 2, **options: Any) -> dict[str, Any]:
    hook = Hook(str(out), save_config=SaveConfig(save_interval=1),
                include_collections=["weights", "biases", "gradients", "losses"])
    model = how(example.build_model(0, checkpoint=options.get("checkpoint", "none")))
    loss_fn = nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x, y = example.batch(step, 0)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    hook.close()
    assert hook.failure is None
    return dump_with_format(out)


def fsdp2(model: nn.Module) -> nn.Module:
    return example.wrap(model, "fsdp2")


WRAPS: dict[str, Callable[[nn.Module], nn.Module]] = {
    "fsdp2": fsdp2,
    "fsdp1": lambda m: example.wrap(m, "fsdp1"),
    "fsdp1-orig": lambda m: example.wrap(m, "fsdp1-orig"),
}


@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize("checkpoint", ["none", "wrapper"])
def test_same_names_and_values_as_the_unwrapped_model(tmp_path: Path, one_rank: None, wrap: str,
                                                       checkpoint: str) -> None:
    plain = trained(tmp_path / "plain", lambda m: m)
    wrapped = trained(tmp_path / "wrapped", WRAPS[wrap], checkpoint=checkpoint)
    assert sorted(wrapped["tensors"]) == sorted(plain["tensors"])
    assert len([n for n in plain["tensors"] if n.startswith("gradient/TinyTransformer_")]) == 30
    for name, steps in plain["tensors"].items():
        for step in steps:
            mine = decode_value_json(wrapped["tensors"][name][step]["worker_0"]["value"])
            theirs = decode_value_json(steps[step]["worker_0"]["value"])
            np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-7, err_msg=f"{name} step {step}")


def test_names_of_wrappers(one_rank: None) -> None:
    assert clean_path("_fsdp_wrapped_module.blocks.0._checkpoint_wrapped_module.qkv") == "blocks.0.qkv"
    assert clean_path("module.fc1") == "module.fc1"  # DDP keeps smdebug's names
    model = example.wrap(example.build_model(0), "fsdp2")
    assert type(model).__name__ == "FSDPTinyTransformer" and model_class_name(model) == "TinyTransformer"
    fsdp1 = example.wrap(example.build_model(0), "fsdp1")
    assert unwrap(fsdp1) is fsdp1.module and model_class_name(unwrap(fsdp1)) == "TinyTransformer"
    plain_names = [n for n, _ in example.build_model(0).named_parameters()]
    assert [p.name for p in model_parameters(fsdp1)] == plain_names
    assert [p.name for p in model_parameters(model)] == plain_names


def test_a_dtensor_sharded_along_columns_is_saved_whole(tmp_path: Path, one_rank: None) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))

    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(distribute_tensor(torch.arange(12.0).reshape(3, 4), mesh, [Shard(1)]))
            self.b = nn.Parameter(distribute_tensor(torch.ones(4), mesh, [Replicate()]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    hook = Hook(str(tmp_path), save_config=SaveConfig(save_interval=1), include_collections=["weights", "biases"],
                include_regex=[r"Scale_[wb]$"])
    module = Scale()
    hook.register_module(module)
    module(torch.ones(2))
    hook.close()
    dump = dump_with_format(tmp_path)
    np.testing.assert_array_equal(decode_value_json(dump["tensors"]["Scale_w"]["0"]["worker_0"]["value"]),
                                  np.arange(12.0, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(decode_value_json(dump["tensors"]["Scale_b"]["0"]["worker_0"]["value"]), np.ones(4))
