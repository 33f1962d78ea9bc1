"""The pattern of smdebug's example script examples/pytorch/scripts/simple.py, in our own code, with the
import prefix changed: a save-all hook with TensorBoard export, ``save_steps``, the model
registered with ``register_hook``, inputs wrapped in ``torch.autograd.Variable``. Real smdebug 1.0.34 reads
the trial it writes as sdk_ext does. (The script itself ran unchanged but for the prefix, side by side with
real smdebug: the same tensor names and steps.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Variable

from sdk_ext.pytorch import Hook, SaveConfig
from tests.compat.test_smdebug_dropin_hooks import same_as_smdebug


class MnistLike(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.add_module("conv1", nn.Conv2d(1, 4, 5, 1))
        self.add_module("relu0", nn.ReLU())
        self.add_module("max_pool", nn.MaxPool2d(2, stride=2))
        self.add_module("fc1", nn.Linear(4 * 4 * 4, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.max_pool(self.relu0(self.conv1(x)))
        return F.log_softmax(self.fc1(x.view(-1, 4 * 4 * 4)), dim=1)


@pytest.mark.smdebug
def test_save_all_example_with_tensorboard_and_save_steps(tmp_path: Path, smdebug_python: Path) -> None:
    out = tmp_path / "trial"
    torch.manual_seed(2)
    model = MnistLike()
    hook = Hook(out_dir=str(out), save_config=SaveConfig(save_steps=[2, 4]), save_all=True, export_tensorboard=True)
    hook.register_hook(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(5):
        data, target = torch.rand(8, 1, 12, 12), (torch.rand(8) * 10).long()
        optimizer.zero_grad()
        loss = F.nll_loss(model(Variable(data, requires_grad=True)), target)
        loss.backward()
        optimizer.step()
    hook.close()
    assert hook.failure is None
    theirs = same_as_smdebug(out, smdebug_python, tmp_path)
    assert theirs["steps"] == {"GLOBAL": [0, 2, 4]}  # save_steps add to the default interval's step 0, as in smdebug
    names = set(theirs["tensor_names"])
    assert {"MnistLike_conv1.weight", "gradient/MnistLike_fc1.bias", "relu0_output_0", "MnistLike_input_0"} <= names
    assert any((out / "tensorboard").rglob("*.tfevents"))
