"""A status round trip through the ssh bridge vs the local socket, on loopback.

Budget (design.md): the bridge adds at most 5 ms per round trip to the local socket's.

A real sshd on 127.0.0.1 and a throwaway local user stand for a host (tests/fleet/sshd.py:
needs root and openssh-server); that user's agent answers both clients: `AgentClient` on its
unix socket (root may open the user's 0600 socket) and `HostClient` over
`ssh USER@127.0.0.1 sgltui agent bridge`. The rounds alternate so background load hits both
alike; the figures are medians and 95th percentiles of the round trip of `status`.

    python bench/bench_bridge.py [--n 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgltui.agent.client import AgentClient  # noqa: E402
from sgltui.fleet import config as fleet_config  # noqa: E402
from sgltui.fleet.client import HostClient  # noqa: E402
from tests.fleet import sshd as sshd_mod  # noqa: E402

BUDGET_MS = 5.0


async def timed(call, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call("status")
        out.append((time.perf_counter() - t0) * 1000)
    return out


def p95(xs: list[float]) -> float:
    return sorted(xs)[int(0.95 * (len(xs) - 1))]


async def measure(s: sshd_mod.Sshd, n: int, rounds: int) -> tuple[list[float], list[float]]:
    fleet = fleet_config.load(s.fleet_toml(s.root / "fleet.toml"))
    host = HostClient(fleet, fleet.hosts[0], "bench")
    await host.connect()  # starts the user's agent through the bridge
    local = AgentClient(s.users[0].state_dir, "bench")
    await local.connect(autostart=False)
    sock_ms: list[float] = []
    bridge_ms: list[float] = []
    try:
        await timed(local.call, 20)  # warm-up
        await timed(host.call, 20)
        for _ in range(rounds):
            sock_ms += await timed(local.call, n)
            bridge_ms += await timed(host.call, n)
    finally:
        await local.close()
        await host.close()
    return sock_ms, bridge_ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    why = sshd_mod.unavailable()
    if why:
        print(f"bench_bridge: cannot run here: {why}", file=sys.stderr)
        return 2
    s = sshd_mod.start(1)
    try:
        sock_ms, bridge_ms = asyncio.run(measure(s, args.n, args.rounds))
    finally:
        sshd_mod.stop_agents(s)
        sshd_mod.stop(s)
    ms, mb = statistics.median(sock_ms), statistics.median(bridge_ms)
    print(f"status round trip, {len(sock_ms)} each:")
    print(f"  local socket  median {ms:.2f} ms  p95 {p95(sock_ms):.2f} ms")
    print(f"  ssh bridge    median {mb:.2f} ms  p95 {p95(bridge_ms):.2f} ms")
    added = mb - ms
    ok = added <= BUDGET_MS
    print(
        f"  added by the bridge: {added:+.2f} ms (budget <= +{BUDGET_MS:.0f} ms): "
        f"{'OK' if ok else 'OVER BUDGET'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
