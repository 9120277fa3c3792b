"""What looking for servers the user started by hand costs the agent (agent/slot/discovery.py).

The agent scans every 5 s: a walk of /proc for this uid's SGLang command lines, then, for a
server not seen before, its listening ports and one GET /server_info. This starts N simulators
by hand (their own sessions, as a user would), then times a first scan (every server asked) and
rescans (command lines and answers kept between scans) (what the agent does every 5 s), and prints the rescan's share
of one core at the agent's interval. Budget: a rescan costs under 2% of one core.

    python bench/bench_discovery.py [--servers 4] [--rounds 20]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sgltui.agent.slot import discovery  # noqa: E402

EVERY_S = 5.0
BUDGET = 0.02


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(port: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "sgltui.sim", "--model-path", "Qwen/Qwen3-8B",
            "--port", str(port), "--sim-time-scale", "0.01"]  # fmt: skip
    return subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env
    )


def wait_ready(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"simulator on :{port} did not become ready")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    ports = [free_port() for _ in range(a.servers)]
    procs = [start(p) for p in ports]
    try:
        for p in ports:
            wait_ready(p)
        t = time.perf_counter()
        found = discovery.scan()
        first = time.perf_counter() - t
        mine = [f for f in found if f.port in ports]
        assert len(mine) == a.servers, f"found {len(mine)} of {a.servers}"
        times = []
        for _ in range(a.rounds):
            t = time.perf_counter()
            discovery.scan()  # what the agent does every 5 s
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        share = med / EVERY_S
        print(f"processes on the host: {len(psutil.pids())}; servers found: {len(found)} "
              f"({a.servers} started here)")  # fmt: skip
        print(f"first scan (each server asked /server_info): {first * 1000:.0f} ms")
        print(f"rescan (answers kept), median of {a.rounds}: {med * 1000:.1f} ms "
              f"= {share:.2%} of a core every {EVERY_S:.0f} s (budget {BUDGET:.0%}); "
              f"ratio first/rescan {first / med:.1f}x")  # fmt: skip
        return 0 if share <= BUDGET else 1
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)


if __name__ == "__main__":
    sys.exit(main())
