"""A job configured through sdk_ext.debugger saves exactly what it asked for.

DebuggerHookConfig + a rule -> apply_debugger -> the request's DebugHookConfig -> the
debughookconfig.json SageMaker writes into the container -> the zero-change hook -> the trial.
"""

import json
from pathlib import Path

import pytest
from torch import nn

from sdk_ext import debugger
from sdk_ext.pytorch import Hook
from tests.functional.pytorch.models import Net, batches, train
from tests.trial_dump import dump_with_format


def test_debugger_hook_config_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRAINING_JOB_NAME", raising=False)
    out = tmp_path / "opt/ml/output/tensors"
    hook_config = debugger.DebuggerHookConfig(
        s3_output_path="s3://bucket/job/debug-output",
        container_local_output_path=str(out),
        hook_parameters={"save_interval": "3", "eval.save_interval": "1"},
        collection_configs=[
            debugger.CollectionConfig("weights"),
            debugger.CollectionConfig("gradients", parameters={"train.save_interval": "2"}),
            debugger.CollectionConfig("relu_activations", parameters={"include_regex": "relu_output"}),
        ],
    )
    rule = debugger.Rule.sagemaker(debugger.rule_configs.loss_not_decreasing())
    request = {"TrainingJobName": "job", "OutputDataConfig": {"S3OutputPath": "s3://bucket/job/"},
               "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.m5.xlarge", "VolumeSizeInGB": 30}}
    request = debugger.apply_debugger(request, debugger_hook_config=hook_config, rules=[rule], region="us-west-2",
                                      framework="pytorch")
    config_file = tmp_path / "opt/ml/input/config/debughookconfig.json"
    config_file.parent.mkdir(parents=True)
    config_file.write_text(json.dumps(request["DebugHookConfig"]))  # what SageMaker hands the container

    hook = Hook.create_from_json_file(config_file)
    assert hook.out_dir == str(out)
    assert set(hook.include_collections) >= {"weights", "gradients", "relu_activations", "losses"}
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode("train")
    train(model, loss_fn, batches(7))
    hook.close()
    tensors = dump_with_format(out)["tensors"]
    assert sorted(int(s) for s in tensors["Net_fc1.weight"]) == [0, 3, 6]
    assert sorted(int(s) for s in tensors["gradient/Net_fc1.weight"]) == [0, 2, 4, 6]
    assert sorted(int(s) for s in tensors["relu_output_0"]) == [0, 3, 6]
    # the rule asked for losses every 500 steps
    assert sorted(int(s) for s in tensors["CrossEntropyLoss_output_0"]) == [0]
