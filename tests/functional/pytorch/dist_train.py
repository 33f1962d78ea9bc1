"""One rank of a 2-process torch.distributed (gloo, CPU) DDP job with the sdk_ext PyTorch hook.

Usage: python dist_train.py OUT_DIR RANK WORLD_SIZE PORT INCLUDE_WORKERS
"""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from sdk_ext.pytorch import Hook, SaveConfig
from tests.functional.pytorch.models import Net, batches


def main() -> None:
    out, rank, world, port, include_workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(Net())
    loss_fn = nn.CrossEntropyLoss()
    hook = Hook(out, save_config=SaveConfig(save_interval=1), include_collections=["weights", "gradients"],
                include_workers=include_workers)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches(3, seed=rank):  # each rank its own data
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    hook.close()
    assert hook.failure is None, hook.failure
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
