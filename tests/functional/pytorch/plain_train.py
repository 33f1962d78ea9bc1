"""A training script that knows nothing about debugging (for the zero-script-change tests).

Usage: python plain_train.py STEPS [KILL_AT_STEP]   (KILL_AT_STEP: SIGKILL itself in the middle of that step)
"""

import os
import signal
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def main() -> None:
    steps = int(sys.argv[1])
    kill_at = int(sys.argv[2]) if len(sys.argv) > 2 else -1
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(steps):
        x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        if step == kill_at:
            print("killing myself mid-step", step, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        loss.backward()
        opt.step()
    print("done", flush=True)


if __name__ == "__main__":
    main()
