#!/usr/bin/env python3
"""The agent's polls: client CPU per GET of an engine's /metrics, three clients in one run.

The agent polls every slot's server every second (/metrics, /v1/loads) and the pool's gateway
(/workers, /metrics); with 8 slots that is ~10 GETs a second, and at issue 39's round httpx's
layers were half of an idle agent's CPU. The agent now uses a small keep-alive reader of its
own (sgltui/agent/telemetry/http_get.py). This bench says whether that reader still earns its
place against aiohttp, which the project already depends on: the client CPU (this process's
`time.process_time`, the server being another process) per sequential GET over one kept
connection, for

- `KeepAliveGet` (the agent's),
- an `aiohttp.ClientSession` with one kept connection,
- an `httpx.AsyncClient` (what the agent used before),

against a server in a subprocess answering a /metrics-sized body (~6 KB, what the simulator
answers with one slot). Rounds alternate so background load hits each alike. The verdict: the
reader is kept only if aiohttp costs at least 1.25x as much per GET.

    python bench/bench_http_get.py [--gets 2000] [--rounds 3] [--body 6000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KEEP_BUDGET = 1.25  # aiohttp / the reader: at or over this, the reader earns its place


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(port: int, body_len: int) -> None:
    """The server child: an aiohttp app answering GET /metrics with `body_len` bytes."""
    from aiohttp import web

    line = b'sglang:num_running_reqs{model_name="demo",engine_type="unified"} 0.0\n'
    body = (line * (body_len // len(line) + 1))[:body_len]

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    web.run_app(app, host="127.0.0.1", port=port, print=None, handle_signals=True)


async def run_reader(url: str, n: int) -> float:
    from sgltui.agent.telemetry.http_get import KeepAliveGet

    client = KeepAliveGet(url)
    try:
        await client.get("/metrics")  # the connection, opened outside the measured part
        c0 = time.process_time()
        for _ in range(n):
            answer = await client.get("/metrics")
            assert answer.status_code == 200 and answer.content
        return (time.process_time() - c0) / n
    finally:
        await client.aclose()


async def run_aiohttp(url: str, n: int) -> float:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=1)
    timeout = aiohttp.ClientTimeout(total=3.0)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:
        async with session.get("/metrics") as r:
            await r.read()
        c0 = time.process_time()
        for _ in range(n):
            async with session.get("/metrics") as r:
                body = await r.read()
                assert r.status == 200 and body
        return (time.process_time() - c0) / n


async def run_httpx(url: str, n: int) -> float:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=3.0) as client:
        await client.get("/metrics")
        c0 = time.process_time()
        for _ in range(n):
            r = await client.get("/metrics")
            assert r.status_code == 200 and r.content
        return (time.process_time() - c0) / n


CLIENTS = {"reader": run_reader, "aiohttp": run_aiohttp, "httpx": run_httpx}


def wait_ready(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server child exited ({proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server child did not listen within 20 s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gets", type=int, default=2000, help="GETs per client per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, clients alternating")
    ap.add_argument("--body", type=int, default=6000, help="bytes of the /metrics answer")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.body)
        return 0
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--body", str(args.body)],
        start_new_session=True,
    )
    try:
        wait_ready(port, proc)
        url = f"http://127.0.0.1:{port}"
        per: dict[str, list[float]] = {name: [] for name in CLIENTS}
        for r in range(args.rounds):
            for name, run in CLIENTS.items():
                per[name].append(asyncio.run(run(url, args.gets)))
            print(
                f"round {r + 1}: "
                + "   ".join(f"{n} {v[-1] * 1e6:6.1f} us/GET" for n, v in per.items())
                + f"   (load average {os.getloadavg()[0]:.2f})"
            )
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    med = {name: statistics.median(v) for name, v in per.items()}
    for name, v in med.items():
        print(
            f"{name:8s} {v * 1e6:6.1f} us of client CPU per GET  ({v / med['reader']:.2f}x the reader)"
        )
    ratio = med["aiohttp"] / med["reader"]
    keep = ratio >= KEEP_BUDGET
    print(
        f"aiohttp / reader: {ratio:.2f}x: "
        + ("the reader earns its place" if keep else "aiohttp is as cheap: replace the reader")
        + f" (line: {KEEP_BUDGET}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
