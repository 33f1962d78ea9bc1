"""With profiling on (the job's profilerconfig.json), each hook records its steps in the step timeline;
with it off, nothing is written and the hook holds no timeline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sdk_ext.hooks import Hook
from sdk_ext.modes import ModeKeys
from sdk_ext.profiler.config import CONFIG_ENV


def _profiling_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **parameters: str) -> Path:
    out = tmp_path / "profiler-output"
    config = tmp_path / "profilerconfig.json"
    config.write_text(json.dumps({"ProfilingIntervalInMilliseconds": 500,
                                  "ProfilingParameters": {"LocalPath": str(out), **parameters}}))
    monkeypatch.setenv(CONFIG_ENV, str(config))
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-1")
    return out


def _steps(out: Path) -> list[tuple[str, str, int]]:
    files = sorted((out / "framework" / "pevents").rglob("*_pythontimeline.json"))
    events = [e for f in files for e in json.loads(f.read_text()) if e["ph"] == "X"]
    return [(e["name"], e["args"]["step_num"], e["dur"]) for e in sorted(events, key=lambda e: e["ts"])]


def test_framework_free_hook_times_each_step_by_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _profiling_on(tmp_path, monkeypatch)
    hook = Hook(str(tmp_path / "trial"))
    for mode, n in ((ModeKeys.TRAIN, 3), (ModeKeys.EVAL, 2), (ModeKeys.TRAIN, 1), (ModeKeys.PREDICT, 1)):
        hook.set_mode(mode)
        for _ in range(n):
            with hook.step():
                hook.save_scalar("x", 1.0)
    hook.close()
    assert [(name, step) for name, step, _ in _steps(out)] == [
        ("Step:ModeKeys.TRAIN", "0"), ("Step:ModeKeys.TRAIN", "1"), ("Step:ModeKeys.TRAIN", "2"),
        ("Step:ModeKeys.EVAL", "0"), ("Step:ModeKeys.EVAL", "1"), ("Step:ModeKeys.TRAIN", "3"),
        ("Step:ModeKeys.PREDICT", "0")]


def test_profiling_off_writes_nothing_and_holds_no_timeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "absent.json"))
    hook = Hook(str(tmp_path / "trial"))
    with hook.step():
        hook.save_scalar("x", 1.0)
    assert hook._timeline is None
    hook.close()
    assert not list(tmp_path.rglob("framework"))


def test_a_disabled_profiler_config_writes_no_timeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "profilerconfig.json"
    config.write_text(json.dumps({"DisableProfiler": True, "ProfilingParameters": {"LocalPath": str(tmp_path)}}))
    monkeypatch.setenv(CONFIG_ENV, str(config))
    hook = Hook(str(tmp_path / "trial"))
    with hook.step():
        pass
    assert hook._timeline is None
    hook.close()


def test_pytorch_hook_times_steps_on_its_fast_path_and_runs_torch_profiler_over_the_detailed_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from sdk_ext.pytorch import Hook as TorchHook

    out = _profiling_on(tmp_path, monkeypatch, DetailedProfilingConfig='{"StartStep": 3, "NumSteps": 2, }')
    hook = TorchHook(str(tmp_path / "trial"))  # saves every 500 steps: steps 1-9 take the quiet fast path
    model = torch.nn.Linear(4, 2)
    hook.register_module(model)
    hook.set_mode(ModeKeys.TRAIN)
    for _ in range(8):
        model(torch.randn(3, 4)).sum().backward()
    hook.set_mode(ModeKeys.EVAL)
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(3, 4))
    hook.close()
    steps = _steps(out)
    assert [(n, s) for n, s, _ in steps] == [("Step:ModeKeys.TRAIN", str(i)) for i in range(8)] + [
        ("Step:ModeKeys.EVAL", "0"), ("Step:ModeKeys.EVAL", "1")]
    [trace] = list((out / "framework" / "pytorch" / "detailed_profiling").rglob("*.pt.trace.json"))
    assert trace.parent.name == "000000003"
    content = json.loads(trace.read_text())
    assert any("aten::" in str(e.get("name", "")) for e in content["traceEvents"])
    assert not list(out.rglob("*.tmp"))


def test_xgboost_rounds_are_training_steps_timed_from_before_to_after_each_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xgb = pytest.importorskip("xgboost")
    from sdk_ext.xgboost import Hook as XgbHook

    out = _profiling_on(tmp_path, monkeypatch)
    rng = np.random.default_rng(0)
    data = xgb.DMatrix(rng.normal(size=(200, 4)), label=rng.integers(0, 2, 200))
    hook = XgbHook(str(tmp_path / "trial"))
    xgb.train({"objective": "binary:logistic", "max_depth": 6}, data, 5, evals=[(data, "train")], callbacks=[hook])
    hook.close()
    steps = _steps(out)
    assert [(n, s) for n, s, _ in steps] == [("Step:ModeKeys.TRAIN", str(i)) for i in range(5)]
    assert all(dur > 0 for _, _, dur in steps)


def test_keras_fit_evaluate_predict_batches_are_steps_and_epoch_metrics_are_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keras = pytest.importorskip("keras")
    from sdk_ext.keras import KerasHook

    out = _profiling_on(tmp_path, monkeypatch)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.random.rand(32, 4).astype("float32"), np.random.rand(32, 1).astype("float32")
    hook = KerasHook(str(tmp_path / "trial"))
    model.fit(x, y, batch_size=8, epochs=2, validation_data=(x[:16], y[:16]), callbacks=[hook], verbose=0)
    model.predict(x[:8], batch_size=8, callbacks=[hook], verbose=0)
    hook.close()
    names = [n for n, _, _ in _steps(out)]
    assert names.count("Step:ModeKeys.TRAIN") == 8
    assert names.count("Step:ModeKeys.EVAL") == 4
    assert names.count("Step:ModeKeys.PREDICT") == 1
    assert "Step:ModeKeys.GLOBAL" not in names
