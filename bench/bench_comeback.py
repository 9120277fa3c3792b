"""Budget (issue 29): an agent killed -9 is serving again within 5 s, by itself; a server killed
-9 is relaunched with its resolved profile (restart policy) with no command typed.

Measures, in the same run:
  agent     kill -9 of the agent (its keeper starts a new one, which re-adopts the server):
            seconds until a new agent answers ping; baseline: a cold `agent start` (spawn ->
            ping) on the same machine, so the ratio says what the come-back adds to a start;
  server    kill -9 of the server under `restart = on-failure`: seconds until the slot is
            ready again with a new pid; baseline: the simulator's own start time, run directly.
Prints medians, ratios and PASS/FAIL against the 5 s budget for the agent.

    python bench/bench_comeback.py [--rounds 3] [--time-scale 0.05]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_swap_overhead import direct_start, free_port, write_profile  # noqa: E402

from sgltui.client import AgentError, call_sync, spawn_agent  # noqa: E402

AGENT_BUDGET_S = 5.0


def until(fn, timeout: float = 60.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            got = fn()
        except AgentError:
            got = None
        if got:
            return got
        time.sleep(0.02)
    raise SystemExit(f"gave up after {timeout}s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time-scale", type=float, default=0.05)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sgltui-bench-comeback-"))
    state, profiles = tmp / "state", tmp / "profiles"
    profiles.mkdir(parents=True)
    os.environ["SGLTUI_SIM_GPU_DIR"] = str(tmp / "simgpu")
    os.environ["SGLTUI_RESTART"] = "on-failure"  # relaunch a crashed server even with no job
    port = free_port()
    write_profile(profiles, "cb", port, args.time_scale)
    server_base = [direct_start(port, args.time_scale) for _ in range(args.rounds)]
    cold, agent_back, server_back = [], [], []
    try:
        for _ in range(args.rounds):  # cold starts: spawn -> ping, then stop
            t0 = time.monotonic()
            spawn_agent(state, [profiles])
            until(lambda: call_sync(state, "ping", autostart=False))
            cold.append(time.monotonic() - t0)
            call_sync(state, "shutdown", autostart=False, stop_servers=True)
            until(lambda: not (state / "agent.sock").exists() or None, 30)
        spawn_agent(state, [profiles])
        call_sync(state, "start", profile="cb", wait=True)
        for _ in range(args.rounds):
            old = call_sync(state, "ping", autostart=False)["pid"]
            os.kill(old, signal.SIGKILL)
            t0 = time.monotonic()
            until(lambda old=old: call_sync(state, "ping", autostart=False)["pid"] != old)
            agent_back.append(time.monotonic() - t0)
            slot = call_sync(state, "status", autostart=False)["slots"][0]
            assert slot["state"] == "ready", slot  # re-adopted, not relaunched
        for _ in range(args.rounds):
            pid = call_sync(state, "status", autostart=False)["slots"][0]["pid"]
            os.killpg(pid, signal.SIGKILL)
            t0 = time.monotonic()

            def relaunched(pid: int = pid) -> bool:
                s = call_sync(state, "status", autostart=False)["slots"][0]
                return s["state"] == "ready" and s["pid"] not in (None, pid)

            until(relaunched)
            server_back.append(time.monotonic() - t0)
            time.sleep(1.0)  # the policy's backoff counts crashes: space them as a person would
    finally:
        try:
            call_sync(state, "shutdown", autostart=False, stop_servers=True)
        except AgentError as exc:
            print(f"shutdown: {exc}", file=sys.stderr)
        time.sleep(0.5)
        shutil.rmtree(tmp, ignore_errors=True)
    c, a = statistics.median(cold), statistics.median(agent_back)
    sb, s = statistics.median(server_base), statistics.median(server_back)
    print(f"cold agent start (median of {len(cold)}): {c:.2f} s  {[round(x, 2) for x in cold]}")
    print(f"agent kill -9 -> a new agent answers: {a:.2f} s  {[round(x, 2) for x in agent_back]}")
    print(f"  ratio to a cold start: {a / c:.2f}x; budget {AGENT_BUDGET_S} s")
    print(f"server's own start (median): {sb:.2f} s; kill -9 -> relaunched and ready: {s:.2f} s")
    print(f"  ratio to its own start: {s / sb:.2f}x (the policy's first backoff is 1 s)")
    ok = max(agent_back) < AGENT_BUDGET_S
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
