"""Build a recorded session through the real Recorder, with a scripted clock.

The story (slot 0, times in seconds from T0):
  0    agent.start
  1    launch demo-no-mtp (api key given)  -> ready at 21 (start 20 s)
  21-80  serving demo-no-mtp, ~1000 tok/s
  80   swap demo-no-mtp -> demo-mtp: drain 2, stop 1, memory release 3, load 14, ready 4 (total 24)
  104-160 serving demo-mtp, ~400 tok/s
  160  swap demo-mtp -> demo-mtp-hicache: fails (oom), rolled back to demo-mtp (ready at 190)
  190-250 serving demo-mtp again, then crash at 250 (exit 1, cause "cuda")
  bench run b1 (two profiles x two concurrencies) finished at 200
The numbers are what the report and replay tests check against.
"""

from __future__ import annotations

import os
from pathlib import Path

from sgltui.bench import compare
from sgltui.core.files import write_json_atomic
from sgltui.session.writer import Recorder

T0 = 1_800_000_000.0
API_KEY = "sk-test-4d1f9a77c0"


def _eng(gen: float, running: int) -> dict:
    return {
        "source": "metrics",
        "ts": 0.0,
        "gen_throughput": gen,
        "num_running_reqs": running,
        "num_queue_reqs": 0,
        "token_usage": 0.5,
        "accept_length": None,
        "max_running_requests": 48,
        "max_total_num_tokens": 100000,
        "cache_hit_rate": 0.1,
    }


def _sample(ts: float, gen: float | None, running: int = 0) -> dict:
    s = {
        "ts": ts,
        "gpus": [{"index": 0, "name": "sim", "used_bytes": 70e9, "total_bytes": 141e9}],
        "host": {"cpu_pct": 5.0},
        "engine": {},
    }
    if gen is not None:
        s["engine"]["0"] = _eng(gen, running)
    return s


# The first swap's time split, as its swap.done says it (the report shows it as it is).
SWAP1_TIMINGS = {
    "drain": 2.0,
    "stop": 1.0,
    "memory_release": 3.0,
    "load": 14.0,
    "ready": 4.0,
    "total": 24.0,
}


def build(root: Path) -> Path:
    """Write the session under root/sessions/ and return its directory."""
    rec = Recorder.create(root)
    t = T0

    def ev(dt: float, type: str, **f):
        return rec.event(type, ts=t + dt, **f)

    def step(dt: float, from_: str, to: str, name: str, elapsed: float):
        return ev(dt, "swap.step", slot="0", to=to, step=name, elapsed_s=elapsed, **{"from": from_})

    ev(0, "agent.start", pid=os.getpid(), version="0.1.0")
    cmd = [
        "python",
        "-m",
        "sgltui.sim",
        "--model-path",
        "m",
        "--api-key",
        API_KEY,
        "--port",
        "30000",
    ]
    ev(1, "command", client="cli:1@h", op="start", args={"profile": "demo-no-mtp"})
    ev(
        1,
        "launch",
        slot="0",
        launch_id="L1",
        profile="demo-no-mtp",
        command=cmd,
        command_hash="h1",
        log_path="servers/L1.log",
    )
    log = rec.server_log_path("L1")
    with open(log, "ab") as fh:
        fh.write(
            f"[2026-12-02 10:00:00] server_args=ServerArgs(model_path='m', api_key='{API_KEY}', port=30000)\n".encode()
        )
        fh.write(b"[2026-12-02 10:00:20] The server is fired up and ready to roll!\n")
    ev(1, "slot.state", slot="0", state="launching", prev="stopped", phase="spawned")
    ev(5, "slot.phase", slot="0", phase="loading weights", progress=0.2, eta_s=10.0)
    ev(15, "slot.phase", slot="0", phase="warming up", progress=0.9, eta_s=2.0)
    ev(21, "slot.state", slot="0", state="ready", prev="launching")
    ev(21, "capacity", slot="0", launch_id="L1", card={"max_running_requests": 48})

    # swap 1: demo-no-mtp -> demo-mtp, ok
    ev(80, "command", client="tui:2@h", op="swap", args={"profile": "demo-mtp"})
    step(80, "demo-no-mtp", "demo-mtp", "draining", 0)
    ev(80, "slot.state", slot="0", state="draining", prev="ready")
    step(82, "demo-no-mtp", "demo-mtp", "stopping", 2)
    ev(82, "slot.state", slot="0", state="stopping", prev="draining")
    ev(83, "slot.state", slot="0", state="stopped", prev="stopping")
    step(83, "demo-no-mtp", "demo-mtp", "releasing memory", 3)
    step(86, "demo-no-mtp", "demo-mtp", "launching", 6)
    ev(86, "launch", slot="0", launch_id="L2", profile="demo-mtp", command=cmd, command_hash="h2")
    rec.server_log_path("L2")
    ev(86, "slot.state", slot="0", state="launching", prev="stopped", phase="spawned")
    ev(100, "slot.phase", slot="0", phase="warming up", progress=0.9, eta_s=2.0)
    ev(104, "slot.state", slot="0", state="ready", prev="launching")
    ev(
        104,
        "swap.done",
        slot="0",
        ok=True,
        rolled_back=False,
        **{"from": "demo-no-mtp", "to": "demo-mtp"},
        timings_s=SWAP1_TIMINGS,
    )

    # swap 2: demo-mtp -> demo-mtp-hicache fails with OOM, rolled back
    step(160, "demo-mtp", "demo-mtp-hicache", "draining", 0)
    ev(160, "slot.state", slot="0", state="draining", prev="ready")
    ev(161, "slot.state", slot="0", state="stopped", prev="stopping")
    ev(
        163,
        "launch",
        slot="0",
        launch_id="L3",
        profile="demo-mtp-hicache",
        command=cmd,
        command_hash="h3",
    )
    l3 = rec.server_log_path("L3")
    with open(l3, "ab") as fh:
        fh.write(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    ev(163, "slot.state", slot="0", state="launching", prev="stopped")
    ev(
        170,
        "slot.state",
        slot="0",
        state="failed",
        prev="launching",
        cause={
            "kind": "oom",
            "summary": "CUDA out of memory while allocating the KV cache",
            "lines": ["torch.OutOfMemoryError: CUDA out of memory."],
            "fix": "lower --mem-fraction-static",
            "exit_code": 1,
        },
    )
    step(171, "demo-mtp", "demo-mtp-hicache", "rolling back", 11)
    ev(171, "launch", slot="0", launch_id="L4", profile="demo-mtp", command=cmd, command_hash="h2")
    rec.server_log_path("L4")
    ev(171, "slot.state", slot="0", state="launching", prev="failed")
    ev(190, "slot.state", slot="0", state="ready", prev="launching")
    ev(
        190,
        "swap.done",
        slot="0",
        ok=False,
        rolled_back=True,
        **{"from": "demo-mtp", "to": "demo-mtp-hicache"},
        timings_s={
            "drain": 0.5,
            "stop": 0.5,
            "memory_release": 2.0,
            "load": 7.0,
            "ready": None,
            "total": 30.0,
        },
    )

    # bench run
    ev(120, "bench.start", run_id="b1")
    bench = _bench_file()
    write_json_atomic(rec.bench_path("b1"), bench)
    ev(200, "bench.done", run_id="b1", path="bench/b1.json")

    with open(rec.server_log_path("L4"), "ab") as fh:
        fh.write(b"RuntimeError: CUDA error: an illegal memory access was encountered\n")
    ev(
        250,
        "slot.state",
        slot="0",
        state="crashed",
        prev="ready",
        cause={
            "kind": "cuda",
            "summary": "CUDA error: an illegal memory access",
            "lines": [],
            "fix": "restart",
            "exit_code": 1,
        },
    )
    ev(260, "agent.stop")

    # timeline: 1 Hz; gen throughput depends on what was serving
    for i in range(0, 261):
        ts = t + i
        if 21 <= i < 80:
            rec.sample(_sample(ts, 1000.0 + (i % 5), 40))
        elif 104 <= i < 160 or 190 <= i < 250:
            rec.sample(_sample(ts, 400.0 + (i % 3), 4))
        else:
            rec.sample(_sample(ts, None))
    rec.close()
    return rec.path


def _bench_file() -> dict:
    results = []
    for profile, base in (("demo-no-mtp", 1000.0), ("demo-mtp", 420.0)):
        for conc in (4, 32):
            for rep in range(3):
                tok = base * (conc / 32) ** (0.3 if profile == "demo-mtp" else 1.0) + rep
                results.append(
                    {
                        "profile": profile,
                        "command_hash": "h",
                        "capacity": None,
                        "server_version": "sim",
                        "concurrency": conc,
                        "repeat": rep,
                        "metrics": {
                            "output_throughput": tok,
                            "request_throughput": tok / 100,
                            "median_ttft_ms": 50.0,
                            "p99_ttft_ms": 90.0,
                            "median_tpot_ms": 1000 / tok * conc,
                            "completed": 100,
                            "failed": 0,
                            "max_concurrent_requests": conc,
                        },
                        "requests_path": None,
                    }
                )
    comparison = compare.build(
        results, job_completions=900_000, job_output_len=256, bench_output_len=256
    )
    out = {
        "v": 1,
        "run_id": "b1",
        "spec": {
            "profiles": ["demo-no-mtp", "demo-mtp"],
            "concurrency": [4, 32],
            "repeat": 3,
            "output_len": 256,
        },
        "results": results,
        "comparison": comparison,
    }
    return out
