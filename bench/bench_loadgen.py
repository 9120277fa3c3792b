#!/usr/bin/env python3
"""Load-generator budgets, measured, not asserted.

Against a server at zero delay (the simulator with --sim-time-scale 0, or the loopback mock
server when the simulator is not available or --server mock is given) this prints:

1. client CPU per streamed token of sgltui's load generator (goal <= 40 us), and of a bare
   aiohttp streaming client measured in the same run on the same server (goal: within 1.25x);
2. the peak number of requests in flight at concurrency 2,048 (goal: equal to it);
3. the tokens the client measured vs the tokens the server says it emitted (goal: within 2%).

    .venv/bin/python bench/bench_loadgen.py [--server sim|mock] [--concurrency 64] [--requests 1024]

Both clients use uvloop and orjson when installed, so the comparison is about the HTTP stack.
Exit code 0 whether or not the goals are met: the figures are the output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIM_RUNNING = 64
STALL_S = 240  # a point that takes longer means the server stalled
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with code {proc.returncode} before it was ready")
        try:
            http_get(url + "/health", 2.0)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server at {url} not ready after {timeout:.0f} s")


def sim_available() -> bool:
    return (ROOT / "sgltui" / "sim" / "__main__.py").exists()


def start_server(
    kind: str, port: int, tick: float = 0.0, running: int = 0
) -> tuple[subprocess.Popen, str]:
    if kind == "sim":
        # A dense 8B model with a bounded running batch for the CPU figures (the rest of the
        # client's streams wait in the server queue, still in flight for the client); the
        # in-flight check lifts the bound (`running`).
        argv = [
            sys.executable,
            "-m",
            "sgltui.sim",
            "--model-path",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--sim-gpu",
            "h200-141gb",
            "--sim-time-scale",
            "0",
            "--enable-metrics",
            "--max-running-requests",
            str(running or SIM_RUNNING),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
    else:
        argv = [
            sys.executable,
            str(ROOT / "tests" / "support" / "mock_server.py"),
            "--port",
            str(port),
            "--tick",
            str(tick),
        ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    return proc, url


def stop_server(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def server_tokens(kind: str, url: str) -> float:
    """What the server says it emitted so far."""
    if kind == "mock":
        return float(json.loads(http_get(url + "/mock/stats"))["tokens"])
    total = 0.0
    for line in http_get(url + "/metrics").decode().splitlines():
        m = re.match(r"^sglang:generation_tokens_total(\{[^}]*\})?\s+([0-9.eE+-]+)$", line)
        if m:
            total += float(m.group(2))
    return total


def _run_client(args: list[str], stalled: str) -> subprocess.CompletedProcess:
    """Run a client (`python ARGS`) in its own session; SystemExit(stalled) after STALL_S."""
    try:
        return subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            start_new_session=True,
            timeout=STALL_S,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    except subprocess.TimeoutExpired:
        raise SystemExit(stalled) from None


def run_sgltui(
    url: str, concurrency: int, requests: int, output_len: int, transport: str = "httpx"
) -> dict:
    cfg = {
        "base_url": url,
        "concurrency": concurrency,
        "requests": requests,
        "input_len": 32,
        "output_len": output_len,
        "flush_cache": False,
        "transport": transport,
    }
    with tempfile.TemporaryDirectory() as tmp:
        proc = _run_client(
            ["-m", "sgltui.bench.loadgen", "--config-json", json.dumps(cfg)]
            + ["--records", str(Path(tmp) / "r.jsonl")],
            f"the server stopped streaming: no result after {STALL_S} s (concurrency "
            f"{concurrency}); rerun with --server mock to measure the client alone",
        )
    last = json.loads(proc.stdout.strip().splitlines()[-1])
    if last.get("type") != "result":
        raise SystemExit(
            f"sgltui load generator failed: {last.get('message') or proc.stderr[-300:]}"
        )
    return last["metrics"]


# ---- the bare aiohttp client (runs in its own process: `--bare ...`) ---------------------------


async def _bare(url: str, concurrency: int, requests: int, output_len: int) -> dict:
    import aiohttp

    from sgltui.bench.apis import loads, request_body
    from sgltui.bench.workload import RandomWorkload

    wl = RandomWorkload(32, output_len)
    tokens = 0
    done = 0

    async def one(session: aiohttp.ClientSession, i: int) -> int:
        body = request_body("completions", wl.item(i).prompt, output_len, None)
        got = 0
        buf = b""
        async with session.post(
            url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
        ) as resp:
            async for chunk in resp.content.iter_any():
                buf += chunk
                parts = buf.split(b"\n\n")
                buf = parts.pop()
                for ev in parts:
                    data = ev[5:].strip()
                    if data == b"[DONE]":
                        return got
                    obj = loads(data)
                    usage = obj.get("usage")
                    if usage:
                        got = usage.get("completion_tokens") or got
        return got

    async def phase(session: aiohttp.ClientSession, start: int, n: int) -> int:
        nonlocal done
        nxt = start
        total = 0

        async def worker() -> None:
            nonlocal nxt, total
            while nxt < start + n:
                i = nxt
                nxt += 1
                got = await one(
                    session, i
                )  # not `total += await ...`: that reads total before awaiting
                total += got

        await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
        return total

    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        connector=conn,
        read_bufsize=10 * 1024 * 1024,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
    ) as session:
        await phase(session, 0, concurrency)  # warmup, excluded like sgltui's
        cpu0, t0 = time.process_time(), time.perf_counter()
        tokens = await phase(session, concurrency, requests)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    return {
        "tokens": tokens,
        "cpu_s": cpu,
        "wall_s": wall,
        "us_per_token": cpu / tokens * 1e6 if tokens else None,
        "tok_s": tokens / wall,
    }


def run_bare(url: str, concurrency: int, requests: int, output_len: int) -> dict:
    proc = _run_client(
        [__file__, "--bare", url, str(concurrency), str(requests), str(output_len)],
        f"the server stopped streaming to the bare client after {STALL_S} s",
    )
    if proc.returncode != 0:
        raise SystemExit(f"bare aiohttp client failed: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--bare":
        url, c, n, out = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        try:
            import uvloop

            uvloop.install()
        except ImportError:
            pass
        print(json.dumps(asyncio.run(_bare(url, c, n, out))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--server", choices=("sim", "mock"), default="sim" if sim_available() else "mock"
    )
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--requests", type=int, default=1024)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--max-concurrency", type=int, default=2048, help="in-flight check level")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of the two clients")
    args = p.parse_args()

    proc, url = start_server(args.server, free_port())
    print(f"server: {args.server} at {url} (zero delay)")
    try:
        ours, bare, same_loop = [], [], []
        for _ in range(args.rounds):  # alternate so drift on a shared machine hits all alike
            before = server_tokens(args.server, url)
            m = run_sgltui(url, args.concurrency, args.requests, args.output_len)
            emitted = server_tokens(args.server, url) - before
            ours.append((m, emitted))
            bare.append(run_bare(url, args.concurrency, args.requests, args.output_len))
            same_loop.append(
                run_sgltui(url, args.concurrency, args.requests, args.output_len, "aiohttp")
            )
    finally:
        stop_server(proc)
    # In flight at 2,048 is a property of the client (connection pool, limits, file descriptors):
    # measured against the mock with a 20 ms tick so that every stream outlasts the ramp-up.
    mock, mock_url = start_server("mock", free_port(), tick=0.02)
    try:
        m_inf = run_sgltui(mock_url, args.max_concurrency, args.max_concurrency, 64)
        server_peak = json.loads(http_get(mock_url + "/mock/stats"))["peak_in_flight"]
    finally:
        stop_server(mock)
    sim_inf = None
    if args.server == "sim":  # the same check end to end: every stream running in the simulator
        sim, sim_url = start_server("sim", free_port(), running=args.max_concurrency)
        try:
            sim_inf = run_sgltui(sim_url, args.max_concurrency, args.max_concurrency, 64)
        finally:
            stop_server(sim)

    us = min(m["client_cpu_us_per_token"] for m, _ in ours)
    us_bare = min(b["us_per_token"] for b in bare)
    print(
        f"\n1. client CPU per streamed token at concurrency {args.concurrency} "
        f"({args.requests} requests x {args.output_len} tokens, best of {args.rounds}):"
    )
    for (m, _), b in zip(ours, bare):
        print(
            f"   sgltui loadgen: {m['client_cpu_us_per_token']:7.1f} us/token  {m['output_throughput']:10,.0f} tok/s   "
            f"bare aiohttp: {b['us_per_token']:7.1f} us/token  {b['tok_s']:10,.0f} tok/s"
        )
    # rounds ran back to back, so each round's ratio compares like with like on a shared machine
    paired = sorted(
        m["client_cpu_us_per_token"] / b["us_per_token"] for (m, _), b in zip(ours, bare)
    )
    median = (
        paired[len(paired) // 2] if len(paired) % 2 else sum(paired[len(paired) // 2 - 1 :][:2]) / 2
    )
    print(
        f"   best: sgltui {us:.1f} us/token (goal <= 40: {'met' if us <= 40 else 'NOT met'}); "
        f"bare aiohttp best {us_bare:.1f} us/token: best-to-best {us / us_bare:.2f}x, "
        f"median of paired rounds {median:.2f}x (goal <= 1.25: {'met' if median <= 1.25 else 'NOT met'})"
    )
    us_same = min(m["client_cpu_us_per_token"] for m in same_loop)
    rounds = ", ".join(f"{m['client_cpu_us_per_token']:.1f}" for m in same_loop)
    print(
        f"   the same sgltui loop on a bare aiohttp session (equal bookkeeping, only the httpx layer removed): "
        f"{rounds} us/token; httpx layer costs {us / us_same:.2f}x "
        f"(goal <= 1.25: {'met' if us / us_same <= 1.25 else 'NOT met'})"
    )
    peak = m_inf["max_concurrent_requests"]
    print(
        f"\n2. in flight at concurrency {args.max_concurrency} (mock server, 20 ms tick): peak {peak} from the records, "
        f"client counter {m_inf['client_peak_in_flight']}, server saw {server_peak}; goal = {args.max_concurrency}: "
        f"{'met' if peak == args.max_concurrency else 'NOT met'}; failed {m_inf['failed']}"
    )
    if sim_inf is not None:
        peak = sim_inf["max_concurrent_requests"]
        print(
            f"   against the simulator (--max-running-requests {args.max_concurrency}, zero delay): peak {peak} "
            f"from the records, client counter {sim_inf['client_peak_in_flight']}; goal = {args.max_concurrency}: "
            f"{'met' if peak == args.max_concurrency else 'NOT met'}; failed {sim_inf['failed']}"
        )
    print("\n3. measured vs emitted tokens (warmup + measured requests):")
    worst = 0.0
    for m, emitted in ours:
        seen = m["total_output_tokens"] + m["warmup_output_tokens"]
        err = abs(seen - emitted) / emitted * 100 if emitted else float("inf")
        worst = max(worst, err)
        rate_server = emitted * m["total_output_tokens"] / seen / m["duration"] if seen else 0.0
        print(
            f"   client {seen:,} tokens, server {emitted:,.0f} tokens: {err:.2f}% apart; "
            f"client {m['output_throughput']:,.0f} tok/s vs server-counted {rate_server:,.0f} tok/s"
        )
    print(f"   worst {worst:.2f}% (goal <= 2%: {'met' if worst <= 2 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
