from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from sdk_ext.hooks import Collection, ReductionConfig, SaveConfig, SaveConfigMode
from sdk_ext.modes import ModeKeys
from sdk_ext.pytorch import Hook
from tests.functional.pytorch.models import Net, batches, train
from tests.trial_dump import decode_value_json, dump_with_format


def value(dump: dict, name: str, step: int) -> np.ndarray:  # type: ignore[type-arg]
    return decode_value_json(dump["tensors"][name][str(step)]["worker_0"]["value"])


def test_weights_gradients_losses_are_the_trained_values(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=2), include_collections=["weights", "biases", "gradients"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    record: dict = {}
    train(model, loss_fn, batches(5), record=record, hook=hook)
    hook.close()
    assert hook.failure is None
    dump = dump_with_format(tmp_path)
    assert dump["steps"] == {"GLOBAL": [0, 1, 2, 3, 4]}  # steps 1 and 3 hold only the lr given there
    assert sorted(dump["tensors"]["scalar/lr"]) == ["0", "1", "2", "3", "4"]
    for step in (0, 2, 4):
        for pname in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"):
            assert np.array_equal(value(dump, f"Net_{pname}", step), record["weights"][step][pname].numpy())
            assert np.array_equal(value(dump, f"gradient/Net_{pname}", step), record["grads"][step][pname].numpy())
        assert np.array_equal(value(dump, "CrossEntropyLoss_output_0", step), record["losses"][step].numpy())
        assert value(dump, "scalar/lr", step).tolist() == [0.1]
    assert "1" not in dump["tensors"]["Net_fc1.weight"]


def test_default_config_saves_only_losses_every_500_steps(tmp_path: Path) -> None:
    model, loss_fn = Net(), nn.MSELoss()
    hook = Hook(tmp_path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for x, _ in batches(3):
        loss_fn(model(x), torch.zeros(6, 3)).backward()
    # between saved steps the only hook left is the model's forward pre-hook (it counts steps)
    assert not loss_fn._forward_hooks and all(not m._forward_hooks for m in model.modules())
    assert len(model._forward_pre_hooks) == 1 and all(p._backward_hooks is None for p in model.parameters())
    hook.close()
    dump = dump_with_format(tmp_path)
    assert dump["tensor_names"] == ["MSELoss_output_0"]
    assert dump["steps"]["GLOBAL"] == [0]


def test_module_inputs_outputs_by_regex_and_by_module(tmp_path: Path) -> None:
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    acts = Collection("acts")
    acts.add_module_tensors(model.relu, inputs=True, outputs=True)
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_regex=[r"^fc2_output_"],
                include_collections=["acts"], collections=[acts])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x, y = batches(1)[0]
    out = model(x)
    loss_fn(out, y).backward()
    hook.close()
    dump = dump_with_format(tmp_path)
    assert set(dump["tensor_names"]) == {"fc2_output_0", "relu_input_0", "relu_output_0", "CrossEntropyLoss_output_0"}
    assert np.array_equal(value(dump, "fc2_output_0", 0), out.detach().numpy())
    assert np.array_equal(value(dump, "relu_output_0", 0), np.maximum(value(dump, "relu_input_0", 0), 0))
    assert hook.get_collection("acts").include_regex == ["^relu_input_", "^relu_output_"]


def test_eval_and_predict_steps_have_no_gradients(tmp_path: Path) -> None:
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_collections=["gradients", "weights"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(ModeKeys.TRAIN)
    train(model, loss_fn, batches(2))
    hook.set_mode(ModeKeys.EVAL)
    with torch.no_grad():
        for x, y in batches(2, seed=1):
            loss_fn(model(x), y)
    hook.set_mode(ModeKeys.PREDICT)
    with torch.no_grad():
        model(batches(1)[0][0])
    hook.close()
    dump = dump_with_format(tmp_path)
    assert dump["steps"] == {"GLOBAL": [0, 1, 2, 3, 4], "TRAIN": [0, 1], "EVAL": [0, 1], "PREDICT": [0]}
    assert sorted(dump["tensors"]["gradient/Net_fc1.weight"]) == ["0", "1"]
    assert sorted(dump["tensors"]["Net_fc1.weight"]) == ["0", "1", "2", "3", "4"]
    assert sorted(dump["tensors"]["CrossEntropyLoss_output_0"]) == ["0", "1", "2", "3"]


def test_reductions_computed_by_torch_match_the_numpy_semantics(tmp_path: Path) -> None:
    model = Net()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_collections=["weights"],
                reduction_config=ReductionConfig(reductions=["mean", "std", "variance", "min"], norms=["l1", "l2"],
                                                 abs_reductions=["max"]))
    hook.register_module(model)
    model(batches(1)[0][0])
    hook.close()
    rec = dump_with_format(tmp_path)["tensors"]["Net_fc1.weight"]["0"]["worker_0"]
    assert rec["value"] == {"error": "TensorUnavailableForStep"}
    w = model.fc1.weight.detach().numpy().astype(np.float64)
    expected = {"mean": w.mean(), "std": w.std(), "variance": w.var(), "min": w.min(), "l1": np.abs(w).sum(),
                "l2": np.sqrt((w**2).sum()), "abs_max": np.abs(w).max()}
    for op, exp in expected.items():
        got = decode_value_json(rec["reductions"][op])
        assert got.shape == (1,) and got.dtype == np.float32
        assert got[0] == pytest.approx(exp, rel=1e-5), op


def test_bfloat16_tensors_are_stored_as_exact_float32(tmp_path: Path) -> None:
    model = Net().to(torch.bfloat16)
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_collections=["weights", "gradients"],
                include_regex=["fc2_output"])
    hook.register_module(model)
    x = batches(1)[0][0].to(torch.bfloat16)
    out = model(x)
    out.float().sum().backward()
    hook.close()
    dump = dump_with_format(tmp_path)
    w = value(dump, "Net_fc1.weight", 0)
    assert w.dtype == np.float32
    assert torch.equal(torch.from_numpy(w).to(torch.bfloat16).float(), model.fc1.weight.detach().float())
    assert np.array_equal(value(dump, "fc2_output_0", 0), out.detach().float().numpy())
    assert np.array_equal(value(dump, "gradient/Net_fc2.bias", 0), model.fc2.bias.grad.float().numpy())


def test_torch_compiled_model_saves_weights_gradients_and_losses(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    compiled = torch.compile(model, backend="aot_eager")  # compiled forward and backward graphs
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_collections=["weights", "gradients"])
    hook.register_module(compiled)
    hook.register_loss(loss_fn)
    record: dict = {}
    train(compiled, loss_fn, batches(3), record=record)
    hook.close()
    assert hook.failure is None
    dump = dump_with_format(tmp_path)
    assert dump["steps"]["GLOBAL"] == [0, 1, 2]
    for step in range(3):
        assert np.array_equal(value(dump, "Net_fc1.weight", step), record["weights"][step]["_orig_mod.fc1.weight"].numpy())
        assert np.array_equal(value(dump, "gradient/Net_fc2.bias", step), record["grads"][step]["_orig_mod.fc2.bias"].numpy())
        assert np.array_equal(value(dump, "CrossEntropyLoss_output_0", step), record["losses"][step].numpy())


def test_explicit_steps_and_record_tensor_value(tmp_path: Path) -> None:
    model = Net()
    hook = Hook(tmp_path, save_config=SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=1)}),
                include_collections=["weights"], include_regex=["^mse"])
    hook.register_module(model)
    hook.set_mode(ModeKeys.TRAIN)
    for x, _ in batches(2):
        with hook.step():
            out = model(x)  # two forwards in one step: one step, parameters saved once
            out2 = model(x)
            hook.record_tensor_value("mse", torch.nn.functional.mse_loss(out, out2))
    hook.close()
    dump = dump_with_format(tmp_path)
    assert dump["steps"] == {"GLOBAL": [0, 1], "TRAIN": [0, 1]}
    assert value(dump, "mse_output_0", 1).tolist() == 0.0
    index = (tmp_path / "index/000000000/000000000000_worker_0.json").read_text()
    assert index.count('"Net_fc1.weight"') == 1


def test_a_failing_hook_never_stops_training(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_config=SaveConfig(save_interval=1), include_collections=["gradients"])
    hook.register_module(model)
    hook.register_loss(loss_fn)

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk on fire")

    train(model, loss_fn, batches(1))
    assert hook._out is not None
    hook._out.write = broken  # type: ignore[method-assign]
    record: dict = {}
    train(model, loss_fn, batches(3), record=record)  # must not raise
    assert len(record["losses"]) == 3
    assert hook.disabled and isinstance(hook.failure, OSError)
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].exc_info is not None and "disk on fire" in caplog.text
    hook.close()


def test_steps_that_save_nothing_still_count_through_mode_and_collection_changes(tmp_path: Path) -> None:
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = Hook(tmp_path, save_config=SaveConfig({ModeKeys.TRAIN: SaveConfigMode(save_interval=4),
                                                  ModeKeys.EVAL: SaveConfigMode(save_interval=3)}))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(ModeKeys.TRAIN)
    train(model, loss_fn, batches(6))  # global 0-5, TRAIN 0-5: saved 0, 4
    hook.set_mode(ModeKeys.EVAL)
    with torch.no_grad():
        for x, y in batches(4):  # global 6-9, EVAL 0-3: saved 0, 3
            loss_fn(model(x), y)
    hook.set_mode(ModeKeys.TRAIN)
    train(model, loss_fn, batches(1))  # global 10, TRAIN 6: not saved
    hook.get_collection("weights").save_config = SaveConfig(save_interval=1)
    hook.policy.include("weights")
    train(model, loss_fn, batches(2))  # global 11-12, TRAIN 7-8: weights every step, losses at 8
    hook.close()
    dump = dump_with_format(tmp_path)
    assert dump["steps"] == {"GLOBAL": [0, 4, 6, 9, 11, 12], "TRAIN": [0, 4, 7, 8], "EVAL": [0, 3]}
    assert sorted(dump["tensors"]["Net_fc1.weight"]) == ["11", "12"]
    assert sorted(dump["tensors"]["CrossEntropyLoss_output_0"]) == ["0", "12", "4", "6", "9"]
