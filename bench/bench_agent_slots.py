"""The agent's own CPU with 8 slots against one slot, idle and under the demo load.

Budget (the design's): the agent with 8 slots uses at most 4x the CPU of the agent with one slot,
idle and under load.

Two real agents run side by side on temporary state dirs, so both see the same background load
of the machine: one with one slot (the one-GPU setup: slot "0", no pool), one with a host of 8
simulated GPUs, 8 slots in one pool behind the gateway (bench/agent_host.py). Every server runs
the simulator profile demo-no-mtp. Each round reads both agents' CPU (user + system, the agent
process alone: not its servers, gateway or load) over the same wall-clock window. Then the demo
load goes on in both (the one slot's server; through the pool's gateway to all 8) and the rounds
run again.

    python bench/bench_agent_slots.py [--slots 8] [--seconds 20] [--rounds 2] [--warmup 5]

Exit 0 when both ratios are within the budget, 1 when one is over.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_host import AgentHost  # noqa: E402

BUDGET = 4.0  # N slots / one slot, agent CPU


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def window(procs: list[psutil.Process], seconds: float) -> list[float]:
    """Each process's CPU seconds per wall second over the same `seconds`."""
    c0 = [cpu_s(p) for p in procs]
    t0 = time.monotonic()
    time.sleep(seconds)
    c1 = [cpu_s(p) for p in procs]
    wall = time.monotonic() - t0
    return [(b - a) / wall for a, b in zip(c0, c1, strict=True)]


def rounds(
    label: str, one: psutil.Process, many: psutil.Process, n: int, args: argparse.Namespace
) -> bool:
    ones, manys = [], []
    for r in range(args.rounds):
        a, b = window([one, many], args.seconds)
        ones.append(a)
        manys.append(b)
        print(
            f"{label} round {r + 1}: agent, 1 slot {a * 100:5.2f}%   agent, {n} slots {b * 100:5.2f}%"
            f"   ({b / a if a else float('inf'):.2f}x; load average {os.getloadavg()[0]:.2f})",
            flush=True,
        )
    a, b = sum(ones) / len(ones), sum(manys) / len(manys)
    ratio = b / a if a > 0 else float("inf")
    ok = ratio <= BUDGET
    print(
        f"{label}: agent with 1 slot {a * 100:.2f}% of one core, with {n} slots {b * 100:.2f}% "
        f"({b / n * 100:.2f}% per slot)"
    )
    print(f"ratio {ratio:.2f}x  ({'met' if ok else 'OVER'}: budget {BUDGET}x)", flush=True)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=8, help="slots of the larger host (default 8)")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds per round (default 20)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds idle and loaded (default 2)")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds before each part")
    args = ap.parse_args()
    if not 2 <= args.slots <= 26:
        ap.error(f"--slots {args.slots}: give 2 to 26")
    one, many = AgentHost(1, "agent1"), AgentHost(args.slots, f"agent{args.slots}")
    try:
        one.start()
        many.start()
        assert one.pid and many.pid
        p1, pn = psutil.Process(one.pid), psutil.Process(many.pid)
        print(f"agents ready: pid {one.pid} (1 slot), pid {many.pid} ({args.slots} slots)")
        time.sleep(args.warmup)
        ok = rounds("idle", p1, pn, args.slots, args)
        one.load(True)
        many.load(True)
        time.sleep(args.warmup)
        ok = rounds("demo load", p1, pn, args.slots, args) and ok
        return 0 if ok else 1
    finally:
        one.stop()
        many.stop()


if __name__ == "__main__":
    sys.exit(main())
