"""plain_train.py's training with the hook asked for in the script, the SageMaker way.

Usage: python explicit_train.py STEPS {create|get_hook} [late]

``create``: ``Hook.create_from_json_file()``; ``get_hook``: ``sdk_ext.pytorch.get_hook(create_if_not_exists=True)``.
``late``: ask for the hook after the first training step (a zero-change hook exists by then).
Prints how many sdk_ext hooks the process holds at the end.
"""

import gc
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plain_train import Net

import sdk_ext.pytorch


def get_hook(api: str) -> sdk_ext.pytorch.Hook:
    if api == "create":
        return sdk_ext.pytorch.Hook.create_from_json_file()
    hook = sdk_ext.pytorch.get_hook(create_if_not_exists=True)
    assert hook is not None
    return hook


def main() -> None:
    steps, api = int(sys.argv[1]), sys.argv[2]
    late = sys.argv[3:] == ["late"]
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = None
    for step in range(steps):
        if hook is None and (not late or step == 1):
            hook = get_hook(api)
            hook.register_module(model)
            hook.register_loss(loss_fn)
        x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    assert hook is not None
    assert sdk_ext.pytorch.get_hook() is hook
    hooks = sum(1 for o in gc.get_objects() if isinstance(o, sdk_ext.pytorch.Hook))
    hook.close()
    print(f"sdk_ext hooks in this process: {hooks}; disabled: {hook.disabled and hook.failure is not None}", flush=True)


if __name__ == "__main__":
    main()
