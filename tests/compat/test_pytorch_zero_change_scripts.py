"""smdebug's PyTorch zero-code-change tests, as a user meets them with sdk_ext.

smdebug's tests/zero_code_change ran training scripts with no hook code inside AWS's Deep Learning
Containers, whose patched PyTorch created smdebug's hook from ``SMDEBUG_CONFIG_FILE_PATH`` at the first
forward call. With stock PyTorch that patch does not exist; sdk_ext's equivalent is the container's entry
point ``python -m sdk_ext.pytorch.run train.py`` (or the ``.pth`` line). Here the scenario of smdebug's
test_training_with_no_grad_updates (an embedding table outside the model, an IterableDataset, Adam,
CosineEmbeddingLoss, the config written by the test's ``build_json`` with ``include_collections=["losses"]``
and ``save_interval=1``) runs that way, and the trial holds the loss of every step.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from sdk_ext.trials import create_trial

SCRIPT = textwrap.dedent("""
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    class Items(IterableDataset):
        def __init__(self, num_items, num_samples):
            self.num_items, self.num_samples = num_items, num_samples

        def __iter__(self):
            return (torch.randint(self.num_items, size=(1,)).item() for _ in range(self.num_samples))

    class Embedder(torch.nn.Module):
        def __init__(self, size):
            super().__init__()
            self.fc = torch.nn.Sequential(torch.nn.Linear(1, size), torch.nn.Tanh())

        def forward(self, x):
            return self.fc(x)

    torch.manual_seed(0)
    table = torch.nn.Embedding.from_pretrained(torch.randn(100, 16))
    model, loss_fn = Embedder(16), torch.nn.CosineEmbeddingLoss()
    optimizer = torch.optim.Adam(model.parameters())
    for batch in DataLoader(Items(100, 20 * 8), batch_size=8):
        target = table(batch)
        loss = loss_fn(model(batch.float().view(-1, 1)), target, torch.ones(target.shape[0], dtype=torch.int32))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""")


def build_json(out_dir: Path, path: Path) -> Path:
    """The config smdebug's zero-code-change tests write (their build_json helper's layout)."""
    config = {"LocalPath": str(out_dir),
              "HookParameters": {"include_workers": "all", "save_all": False, "save_interval": "1"},
              "CollectionConfigurations": [{"CollectionName": "losses"}]}
    path.write_text(json.dumps(config))
    return path


def test_a_script_without_hook_code_saves_the_loss_of_every_step(tmp_path: Path, repo_env: dict[str, str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(repo_env, SMDEBUG_CONFIG_FILE_PATH=str(build_json(tmp_path / "out", tmp_path / "config.json")))
    proc = subprocess.run([sys.executable, "-m", "sdk_ext.pytorch.run", str(script)], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    trial = create_trial(str(tmp_path / "out"))
    # 20 batches, one step each, each with its loss (smdebug's test, 100 batches, expects 99 saved steps:
    # one step's loss fewer than the batches trained)
    assert trial.steps() == list(range(20))
    assert trial.tensor_names(collection="losses") == ["CosineEmbeddingLoss_output_0"]
    assert trial.tensor("CosineEmbeddingLoss_output_0").steps() == list(range(20))
