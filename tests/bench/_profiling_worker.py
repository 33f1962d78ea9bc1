"""One side of the profiling cost benchmark, run in its own process. Prints one JSON document on the last
stdout line.

Usage: python _profiling_worker.py --impl sdk_ext --out DIR [--monitor-seconds 60 --interval-ms 100]
       python _profiling_worker.py --impl smdebug --out DIR     (smdebug 1.0.34's venv: its timeline writer)

sdk_ext:
- ``timeline_us_per_step``: StepTimeline.begin() per step on the real clock, files written (100k steps, best
  of 5 runs), and the framework-free hook's ``with hook.step(): pass`` with profiling on vs off (alternating
  blocks of 10k steps, medians).
- ``monitor``: the system monitor as a job runs it (``python -m sdk_ext.profiler.monitor``, 100 ms) for
  ``--monitor-seconds`` while a PyTorch MLP trains under the default hook with profiling on: the monitor's own
  CPU time (user + system, from /proc via psutil) over that time, after a 2 s start.
- ``step_ms``: that MLP's step time in alternating 25-step blocks with the monitor running vs stopped (SIGSTOP),
  and a second stopped block (the noise floor), medians over blocks.
offcost (``--impl offcost``, any source tree on PYTHONPATH): profiling off, the framework-free hook's
``with hook.step(): pass`` and a PyTorch forward of Linear(1, 1) under the hook's quiet fast path, best of 15
blocks of 10k (the least disturbed block on a shared machine).
smdebug: ``timeline_us_per_step``: its TimelineFileWriter.write_trace_events per step event (the call its hooks
made each step), 100k events up to close(), best of 5 (20k events: it flushes the file after every event).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

N_EVENTS = 100_000
N_SMDEBUG_EVENTS = 20_000  # its writer flushes every event: 100k take minutes


def smdebug_timeline(out):
    config = os.path.join(out, "profilerconfig.json")
    with open(config, "w") as f:
        json.dump({"ProfilingParameters": {"ProfilerEnabled": True, "LocalPath": out}}, f)
    os.environ["SMPROFILER_CONFIG_PATH"] = config
    from smdebug.core.tfevent.timeline_file_writer import TimelineFileWriter
    from smdebug.profiler.profiler_config_parser import ProfilerConfigParser

    parser = ProfilerConfigParser()
    assert parser.profiling_enabled
    best = float("inf")
    for _ in range(5):
        writer = TimelineFileWriter(profiler_config_parser=parser)
        start = time.perf_counter()
        for i in range(N_SMDEBUG_EVENTS):
            now = time.time()
            writer.write_trace_events(training_phase="Step:ModeKeys.TRAIN", op_name="Step:ModeKeys.TRAIN",
                                      phase="X", timestamp=now, duration=0.001, pid=1, step_num=str(i))
        writer.close()
        best = min(best, (time.perf_counter() - start) / N_SMDEBUG_EVENTS * 1e6)
    return {"timeline_us_per_step": best}


def sdk_ext_timeline(out):
    from sdk_ext.hooks import Hook
    from sdk_ext.hooks.step_counter import Step
    from sdk_ext.modes import ModeKeys
    from sdk_ext.profiler.timeline import StepTimeline

    best = float("inf")
    for run in range(5):
        tl = StepTimeline(os.path.join(out, f"tl{run}"), f"{os.getpid()}-algo-1")
        steps = [Step(i, ModeKeys.TRAIN, i) for i in range(N_EVENTS)]
        start = time.perf_counter()
        for step in steps:
            tl.begin(step)
        tl.close()
        best = min(best, (time.perf_counter() - start) / N_EVENTS * 1e6)
    # the framework-free hook, profiling off and on, alternating blocks
    config = os.path.join(out, "profilerconfig.json")
    with open(config, "w") as f:
        json.dump({"ProfilingIntervalInMilliseconds": 100, "ProfilingParameters": {"LocalPath": out}}, f)
    hooks = {}
    for name, path in (("off", os.path.join(out, "absent.json")), ("on", config)):
        os.environ["SMPROFILER_CONFIG_PATH"] = path  # read at the hook's first step
        hooks[name] = Hook(os.path.join(out, name))
        with hooks[name].step():
            pass
    off, on = hooks["off"], hooks["on"]
    assert off._timeline is None and on._timeline is not None
    times = {"off": [], "on": []}
    for block in range(10):
        for name in (("off", "on") if block % 2 else ("on", "off")):
            hook = off if name == "off" else on
            start = time.perf_counter()
            for _ in range(10_000):
                with hook.step():
                    pass
            times[name].append((time.perf_counter() - start) / 10_000 * 1e6)
    off.close()
    on.close()
    return {"timeline_us_per_step": best, "hook_step_us_off": statistics.median(times["off"]),
            "hook_step_us_on": statistics.median(times["on"])}


def _pct(a, b):
    """Median and quartiles over rounds of 100 * (a / b - 1)."""
    ratios = sorted(100.0 * (x / y - 1.0) for x, y in zip(a, b))
    q = statistics.quantiles(ratios, n=4)
    return {"median": statistics.median(ratios), "q1": q[0], "q3": q[2]}


def sdk_ext_monitor(out, seconds, interval_ms):
    import psutil
    import torch
    from torch import nn

    from sdk_ext.pytorch import Hook

    torch.set_num_threads(1)
    prof = os.path.join(out, "profiler-output")
    config = os.path.join(out, "monitor-config.json")
    with open(config, "w") as f:
        json.dump({"ProfilingIntervalInMilliseconds": interval_ms, "ProfilingParameters": {"LocalPath": prof}}, f)
    os.environ["SMPROFILER_CONFIG_PATH"] = config
    monitor = subprocess.Popen([sys.executable, "-m", "sdk_ext.profiler.monitor", "--out", prof, "--config", config],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = psutil.Process(monitor.pid)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                          nn.Linear(64, 10))
    loss_fn, opt = nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.01)
    hook = Hook(os.path.join(out, "trial"))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(64, 1, 28, 28, generator=g), torch.randint(0, 10, (64,), generator=g)) for _ in range(25)]

    def block():
        start = time.perf_counter()
        for x, y in data:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return (time.perf_counter() - start) / len(data) * 1e3

    try:
        time.sleep(2.0)  # interpreter start and imports: not the monitor's steady cost
        cpu0, wall0 = sum(proc.cpu_times()[:2]), time.monotonic()
        steps = 0
        while time.monotonic() - wall0 < seconds:
            block()
            steps += 25
        cpu = sum(proc.cpu_times()[:2]) - cpu0
        wall = time.monotonic() - wall0
        # step time with the monitor running vs stopped, alternating
        times = {"running": [], "stopped": [], "stopped_again": []}
        order = ["running", "stopped", "stopped_again"]
        for r in range(120):
            for name in order[r % 3:] + order[:r % 3]:
                if name == "running":
                    monitor.send_signal(signal.SIGCONT)
                else:
                    monitor.send_signal(signal.SIGSTOP)
                times[name].append(block())
        monitor.send_signal(signal.SIGCONT)
    finally:
        monitor.send_signal(signal.SIGCONT)
        monitor.terminate()
        monitor.wait(timeout=30)
        hook.close()
    return {"monitor_cpu_s": cpu, "monitor_wall_s": wall, "monitor_cpu_percent": 100.0 * cpu / wall,
            "train_steps": steps, "cores": psutil.cpu_count(),
            "step_ms": {k: statistics.median(v) for k, v in times.items()},
            # per round (three adjacent blocks), so drift between rounds cancels: percent over the stopped block
            "running_vs_stopped_pct": _pct(times["running"], times["stopped"]),
            "stopped_again_vs_stopped_pct": _pct(times["stopped_again"], times["stopped"]),
            }


def off_cost(out):
    """Profiling off (no profilerconfig.json): a hook's step, framework-free and PyTorch's quiet fast path."""
    import torch

    from sdk_ext.hooks import Hook
    from sdk_ext.pytorch import Hook as TorchHook

    os.environ["SMPROFILER_CONFIG_PATH"] = os.path.join(out, "absent.json")
    torch.set_num_threads(1)
    free = Hook(os.path.join(out, "free"))
    model = torch.nn.Linear(1, 1)
    torch_hook = TorchHook(os.path.join(out, "torch"))
    torch_hook.register_module(model)
    x = torch.zeros(1, 1)
    results = {"free": [], "torch": []}
    with torch.no_grad():
        for _ in range(15):
            start = time.perf_counter()
            for _ in range(10_000):
                with free.step():
                    pass
            results["free"].append((time.perf_counter() - start) / 10_000 * 1e6)
            start = time.perf_counter()
            for _ in range(10_000):
                model(x)
            results["torch"].append((time.perf_counter() - start) / 10_000 * 1e6)
    free.close()
    torch_hook.close()
    return {"free_step_us": min(results["free"]), "torch_forward_us": min(results["torch"])}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--impl", choices=["sdk_ext", "smdebug", "offcost"], required=True)
    p.add_argument("--out", default=None)
    p.add_argument("--monitor-seconds", type=float, default=60.0)
    p.add_argument("--interval-ms", type=int, default=100)
    args = p.parse_args()
    out = args.out or tempfile.mkdtemp()
    if args.impl == "smdebug":
        result = smdebug_timeline(out)
    elif args.impl == "offcost":
        result = off_cost(out)
    else:
        result = sdk_ext_timeline(out)
        if args.monitor_seconds > 0:
            result.update(sdk_ext_monitor(out, args.monitor_seconds, args.interval_ms))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
