"""A status round trip through the ssh bridge vs the local socket, on loopback.

Budgets: the bridge adds at most 5 ms per round trip to the local socket's; the
fleet TUI's idle CPU with 4 hosts is at most 1.5x its CPU with one host.

A real sshd on 127.0.0.1 and a throwaway local user stand for a host (tests/fleet/sshd.py:
needs root and openssh-server); that user's agent answers both clients: `AgentClient` on its
unix socket (root may open the user's 0600 socket) and `HostClient` over
`ssh USER@127.0.0.1 sgltui agent bridge`. The rounds alternate so background load hits both
alike; the figures are medians and 95th percentiles of the round trip of `status`.

The TUI part runs the app on the fleet (`sgltui fleet tui`, what a bare `sgltui` opens with a
fleet.toml: every pane, the Hosts view and the slots view) in a real pseudo-terminal (120x40),
once with a fleet of one host and once of four (four [[host]] entries reaching the same user:
four links, four ssh, four STATUS polls and four subscriptions, each pushing its samples every
second; the agent's side is not what is measured), rounds alternating; CPU is the app process's
own (every thread's, from schedstat), its ssh children reported apart.

With --server a simulator is ready on the host for the TUI part: each of the four hosts then
shows a slot whose figures move every second (the chart's series per slot, the slots view).

    python bench/bench_bridge.py [--n 300] [--rounds 3] [--tui-seconds 20] [--no-tui] [--server]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import pty
import pwd
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgltui.client import AgentClient  # noqa: E402
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


SIM_PROFILE = """name = "bench-sim"
launcher = "sim"
[server]
model-path = "meta-llama/Llama-3.1-8B-Instruct"
port = {port}
sim-time-scale = 0.01
"""


def write_profile(s: sshd_mod.Sshd) -> None:
    """A simulator profile in the user's profiles dir (theirs: owned by them)."""
    u = s.users[0]
    prof = u.home / ".config" / "sgltui" / "profiles"
    prof.mkdir(parents=True, exist_ok=True)
    (prof / "bench-sim.toml").write_text(SIM_PROFILE.format(port=sshd_mod.free_port()))
    pw = pwd.getpwnam(u.name)
    for p in [u.home / ".config", *(u.home / ".config").rglob("*")]:
        os.chown(p, pw.pw_uid, pw.pw_gid)


async def measure(
    s: sshd_mod.Sshd, n: int, rounds: int, server: bool = False
) -> tuple[list[float], list[float]]:
    fleet = fleet_config.load(s.fleet_toml(s.root / "fleet.toml"))
    host = HostClient(fleet, fleet.hosts[0], "bench")
    await host.connect()  # starts the user's agent through the bridge
    if server:  # a ready simulator: every sample then carries its engine figures to draw
        await host.call("start", profile="bench-sim", wait=True)
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


TUI_BUDGET = 1.5


def fleet_file(s: sshd_mod.Sshd, n: int) -> Path:
    u = s.users[0]
    lines = ["[ssh]", f'options = ["-F", "{s.ssh_config}"]', ""]
    for i in range(n):
        lines += ["[[host]]", f'name = "h{i + 1}"', f'ssh = "{u.name}@127.0.0.1"']
        lines += [f'sgltui = "{s.sgltui}"', ""]
    path = s.root / f"fleet{n}.toml"
    path.write_text("\n".join(lines))
    return path


def on_cpu_s(pid: int) -> float:
    """Seconds on a CPU of every thread of `pid`, to the nanosecond (/proc/PID/task/*/schedstat;
    psutil's counters tick at 10 ms, a good part of what an idle app uses in 20 s)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    return total / 1e9


def tui_cpu(path: Path, warmup: float, seconds: float) -> tuple[float, float]:
    """(app CPU s, its ssh children's CPU s) over `seconds` after `warmup`."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    argv = [sys.executable, "-m", "sgltui", "--fleet", str(path), "fleet", "tui"]
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:
            pass

    threading.Thread(target=drain, daemon=True).start()
    p = psutil.Process(proc.pid)
    try:
        time.sleep(warmup)
        kids = p.children(recursive=True)
        t0, k0 = on_cpu_s(p.pid), sum(on_cpu_s(k.pid) for k in kids)
        time.sleep(seconds)
        t1, k1 = on_cpu_s(p.pid), sum(on_cpu_s(k.pid) for k in kids)
        return t1 - t0, max(0.0, k1 - k0)
    finally:
        os.write(master, b"q")
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        os.close(master)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tui-seconds", type=float, default=20.0)
    ap.add_argument("--tui-rounds", type=int, default=2)
    ap.add_argument("--no-tui", action="store_true")
    ap.add_argument(
        "--server",
        action="store_true",
        help="a simulator runs on the host during the TUI part (its chart and slot rows move)",
    )
    args = ap.parse_args()
    why = sshd_mod.unavailable()
    if why:
        print(f"bench_bridge: cannot run here: {why}", file=sys.stderr)
        return 2
    s = sshd_mod.start(1)
    cpu: dict[int, list[tuple[float, float]]] = {1: [], 4: []}
    try:
        if args.server:
            write_profile(s)
        sock_ms, bridge_ms = asyncio.run(measure(s, args.n, args.rounds, args.server))
        if not args.no_tui:
            files = {n: fleet_file(s, n) for n in (1, 4)}
            for _ in range(args.tui_rounds):
                for n in (1, 4):
                    cpu[n].append(tui_cpu(files[n], 8.0, args.tui_seconds))
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
        f"{'met' if ok else 'OVER'}"
    )
    if not args.no_tui:
        one = sum(c for c, _ in cpu[1]) / len(cpu[1]) / args.tui_seconds
        four = sum(c for c, _ in cpu[4]) / len(cpu[4]) / args.tui_seconds
        ssh1 = sum(k for _, k in cpu[1]) / len(cpu[1]) / args.tui_seconds
        ssh4 = sum(k for _, k in cpu[4]) / len(cpu[4]) / args.tui_seconds
        ratio = four / one if one else float("inf")
        tui_ok = ratio <= TUI_BUDGET
        what = "a simulator ready on the host" if args.server else "no server"
        print(f"fleet TUI idle CPU ({what}), {args.tui_rounds} x {args.tui_seconds:.0f} s each:")
        print(f"  1 host   {one * 100:.2f}% of a core (its ssh: {ssh1 * 100:.2f}%)")
        print(f"  4 hosts  {four * 100:.2f}% of a core (their ssh: {ssh4 * 100:.2f}%)")
        print(
            f"  4 hosts / 1 host: {ratio:.2f}x (budget <= {TUI_BUDGET}x): "
            f"{'met' if tui_ok else 'OVER'}"
        )
        ok = ok and tui_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
