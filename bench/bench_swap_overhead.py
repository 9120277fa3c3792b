"""Budget: keystroke to the new profile being ready = the server's own start time + under 0.5 s.

Measures, in the same run and on the same simulator profile:
  baseline  spawn `python -m sgltui.sim ...` directly, until its ready line is printed and
            /ready answers (the server's own start time);
  agent     `swap` through a real agent (drain, stop the old server, wait for its memory and
            port, launch, detect ready) from the command to the reply.
Overhead = agent - baseline (median of N rounds); also the agent's ready-detection delay (ready
line in the log -> slot ready). Prints the figures and PASS/FAIL against the 0.5 s budget.

Also: a refused swap (preflight: a HiCache host pool far over the host's RAM) must answer in
under 2 s and leave the running server untouched (same pid, still ready).

    .venv/bin/python bench/bench_swap_overhead.py [--rounds 5] [--time-scale 0.05]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sgltui.client import AgentError, call_sync, spawn_agent  # noqa: E402

BUDGET_S = 0.5
REFUSED_BUDGET_S = 2.0
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def direct_start(port: int, scale: float) -> float:
    argv = [
        sys.executable,
        "-m",
        "sgltui.sim",
        "--model-path",
        MODEL,
        "--port",
        str(port),
        "--sim-time-scale",
        str(scale),
    ]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if "The server is fired up and ready to roll!" in line:
                break
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as r:
                    if r.status == 200:
                        return time.monotonic() - t0
            except OSError:
                time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def write_profile(d: Path, name: str, port: int, scale: float) -> None:
    (d / f"{name}.toml").write_text(
        f'name = "{name}"\nlauncher = "sim"\n[server]\nmodel-path = "{MODEL}"\nport = {port}\n'
        f"sim-time-scale = {scale}\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--time-scale", type=float, default=0.05)
    ap.add_argument(
        "--keep", action="store_true", help="keep the state dir (agent log, session) afterwards"
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sgltui-bench-swap-"))
    print(f"state and logs: {tmp}")
    state, profiles = tmp / "state", tmp / "profiles"
    profiles.mkdir(parents=True)
    os.environ["SGLTUI_SIM_GPU_DIR"] = str(tmp / "simgpu")
    port = free_port()
    write_profile(profiles, "bench-a", port, args.time_scale)
    write_profile(profiles, "bench-b", port, args.time_scale)
    write_profile(profiles, "bench-huge", free_port(), args.time_scale)
    with open(profiles / "bench-huge.toml", "a") as fh:
        fh.write("enable-hierarchical-cache = true\nhicache-size = 100000\n")

    baseline = [direct_start(port, args.time_scale) for _ in range(args.rounds)]
    spawn_agent(state, [profiles])
    agent_s, ready_delay, steps = [], [], []
    try:
        call_sync(state, "start", profile="bench-a", wait=True)
        for i in range(args.rounds):
            target = "bench-b" if i % 2 == 0 else "bench-a"
            time.sleep(
                1.0
            )  # a person presses the key later than the ready line (the warm-up is done)
            t0 = time.monotonic()
            res = call_sync(state, "swap", profile=target, wait=True, drain="wait")
            agent_s.append(time.monotonic() - t0)
            assert res["slot"]["state"] == "ready", res
            ready_delay.append(res["result"]["timings_s"].get("ready", 0.0))
            steps.append(res["result"]["timings_s"])
        refused_s, untouched = [], True
        for _ in range(args.rounds):
            before = call_sync(state, "status")["slots"][0]
            t0 = time.monotonic()
            try:
                call_sync(state, "swap", profile="bench-huge", wait=True)
                untouched = False  # it should have been refused
            except AgentError as exc:
                refused_s.append(time.monotonic() - t0)
                refusal = str(exc)
            after = call_sync(state, "status")["slots"][0]
            untouched &= after["state"] == "ready" and after["pid"] == before["pid"]
    finally:
        try:
            call_sync(state, "shutdown", autostart=False, stop_servers=True)
        except AgentError as exc:  # the figures above are still worth printing
            print(f"shutdown: {exc}", file=sys.stderr)
        if not args.keep:
            time.sleep(0.5)  # let the agent finish its last writes
            shutil.rmtree(tmp, ignore_errors=True)
    base, via = statistics.median(baseline), statistics.median(agent_s)
    # The old server's own shutdown (SIGTERM -> exit: SGLang releases its schedulers) is the
    # server's time, like its start-up; what remains is what the agent adds.
    own_stop = statistics.median(s.get("stop", 0.0) for s in steps)
    overhead = via - base - own_stop
    print(
        f"server start alone (median of {args.rounds}): {base:.3f} s   {[round(x, 3) for x in baseline]}"
    )
    print(f"swap through the agent (median):      {via:.3f} s   {[round(x, 3) for x in agent_s]}")
    print(f"old server's own shutdown (median): {own_stop:.3f} s")
    print(
        f"agent overhead = swap - start - shutdown: {overhead:.3f} s (budget {BUDGET_S} s); ready-detection delay median "
        f"{statistics.median(ready_delay) * 1000:.0f} ms"
    )
    for k in ("drain", "stop", "memory_release", "load", "ready"):
        print(f"  swap step {k:<15} median {statistics.median(s.get(k, 0.0) for s in steps):.3f} s")
    refused = max(refused_s) if refused_s else float("inf")
    print(
        f"refused swap (preflight), slowest of {len(refused_s)}: {refused:.3f} s "
        f"(budget {REFUSED_BUDGET_S} s); running server untouched: {untouched}"
    )
    if refused_s:
        print(f"  refusal: {refusal}")
    ok = overhead < BUDGET_S and refused < REFUSED_BUDGET_S and untouched
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
