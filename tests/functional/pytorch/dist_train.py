"""One rank of a 2-process torch.distributed (gloo, CPU) DDP job with the sdk_ext PyTorch hook.

Usage: python dist_train.py OUT_DIR RANK WORLD_SIZE STORE_FILE INCLUDE_WORKERS

The ranks meet through a file store (no fixed TCP port another process could take).
"""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from sdk_ext.pytorch import Hook, SaveConfig
from tests.functional.pytorch.launch import leave_past_last_barrier
from tests.functional.pytorch.models import Net, batches


def main() -> None:
    out, rank, world, store, include_workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
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
    dist.barrier()
    leave_past_last_barrier()


if __name__ == "__main__":
    main()
