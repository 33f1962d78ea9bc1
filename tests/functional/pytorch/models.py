"""Small models and a training loop for the PyTorch hook tests (CPU, seconds)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def batches(n: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(6, 8, generator=g), torch.randint(0, 3, (6,), generator=g)) for _ in range(n)]


def train(model: nn.Module, loss_fn: nn.Module, data: list[tuple[torch.Tensor, torch.Tensor]],
          *, record: dict[str, Any] | None = None, hook: Any = None, lr: float = 0.1) -> None:
    """SGD over ``data``; ``record`` collects per-step weights (before the update), grads and losses."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for step, (x, y) in enumerate(data):
        if record is not None:
            record.setdefault("weights", []).append({n: p.detach().clone() for n, p in model.named_parameters()})
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if record is not None:
            record.setdefault("grads", []).append({n: p.grad.detach().clone() for n, p in model.named_parameters()})
            record.setdefault("losses", []).append(loss.detach().clone())
        opt.step()
        if hook is not None:
            hook.save_scalar("lr", lr)
