#!/usr/bin/env python3
"""Pool budgets (issue 26), measured in one run, not asserted. Simulator at time scale 1.0,
the real smg (PyPI smg) as the gateway (agent/pools/gateway.py), the job runner as the client:

1. a job through the gateway to one slot vs the same job direct to its server: wall time
   (goal <= 1.03x);
2. a job on a pool of two simulated GPUs vs one (both through the gateway): output tok/s
   (goal >= 1.8x);
3. a rolling swap of a two-slot pool (a real agent, host.toml, `swap --pool`) under 8 streaming
   clients: client errors and truncated streams (goal 0 and 0);
4. the gateway killed -9 under 8 streaming clients: seconds until it answers again
   (goal <= 5 s), and what the clients saw meanwhile.

    python bench/bench_pool.py [--requests 600] [--output-len 64] [--concurrency 32]

Exit 0 whatever the figures: they are the output.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_job import run_worker, start_sim, write_input  # noqa: E402
from bench_loadgen import free_port, stop_server  # noqa: E402

from sgltui.agent.pools.gateway import Gateway  # noqa: E402
from sgltui.core.placement import DEFAULT_POLICY  # noqa: E402

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def tokens(out: Path) -> int:
    n = 0
    for line in out.read_text().splitlines():
        body = (json.loads(line).get("response") or {}).get("body") or {}
        n += int((body.get("usage") or {}).get("completion_tokens") or 0)
    return n


def job(url: str, inp: Path, tmp: Path, concurrency: int, tag: str) -> tuple[float, int]:
    out = tmp / f"out-{tag}.jsonl"
    out.unlink(missing_ok=True)
    t0 = time.monotonic()
    run_worker(url, inp, out, concurrency)
    return time.monotonic() - t0, tokens(out)


async def with_gateway(urls: list[str], tmp: Path, fn):
    gw = Gateway(
        "bench",
        host="127.0.0.1",
        port=free_port(),
        prometheus_port=free_port(),
        state_dir=tmp / "state",
        model=MODEL,
        policy=DEFAULT_POLICY,  # what a pool of host.toml gets
    )
    await gw.start(urls)
    try:
        return await fn(gw)
    finally:
        await gw.stop()


def part12(args, tmp: Path) -> None:
    inp = tmp / "in.jsonl"
    write_input(inp, args.requests, args.output_len)
    a_port, b_port = free_port(), free_port()
    a = start_sim(a_port, 1.0, args.running)
    b = start_sim(b_port, 1.0, args.running)
    ua, ub = f"http://127.0.0.1:{a_port}", f"http://127.0.0.1:{b_port}"
    try:

        async def one(gw):
            direct, via = [], []
            for r in range(2):  # alternate the order: the machine is shared
                order = [("direct", ua), ("gateway", gw.endpoint)]
                for name, url in order if r == 0 else order[::-1]:
                    wall, _ = await asyncio.to_thread(job, url, inp, tmp, args.concurrency, name)
                    (direct if name == "direct" else via).append(wall)
            return min(direct), min(via)

        d, v = asyncio.run(with_gateway([ua], tmp, one))
        print(
            f"1. job of {args.requests} x {args.output_len} tokens at c={args.concurrency}: "
            f"direct {d:.2f} s, through the gateway {v:.2f} s: {v / d:.3f}x (goal <= 1.03x)"
        )

        async def rate(gw):
            wall, toks = await asyncio.to_thread(
                job, gw.endpoint, inp, tmp, args.concurrency * 2, "pool"
            )
            return toks / wall

        one_rate = asyncio.run(with_gateway([ua], tmp, rate))
        two_rate = asyncio.run(with_gateway([ua, ub], tmp, rate))
        print(
            f"2. pool of two vs one (max-running {args.running} each, c={args.concurrency * 2}): "
            f"{two_rate:,.0f} vs {one_rate:,.0f} tok/s: {two_rate / one_rate:.2f}x (goal >= 1.8x)"
        )
    finally:
        stop_server(a)
        stop_server(b)


class Streams:
    """8 streaming clients until stopped; each outcome counted."""

    def __init__(self, url: str, n: int = 8) -> None:
        self.url = url
        self.stop = threading.Event()
        self.ok = self.errors = self.truncated = 0
        self.first_error: str | None = None
        self.error_times: list[float] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.client) for _ in range(n)]

    def client(self) -> None:
        import httpx

        with httpx.Client(timeout=60) as c:
            while not self.stop.is_set():
                body = {"model": "default", "prompt": "x", "max_tokens": 64, "stream": True}
                what = "ok"
                try:
                    with c.stream("POST", self.url + "/v1/completions", json=body) as r:
                        text = "".join(r.iter_text())
                    if r.status_code != 200:
                        what = f"HTTP {r.status_code}"
                    elif "[DONE]" not in text or '"error"' in text:
                        what = "truncated"
                except httpx.HTTPError as exc:
                    what = f"error {type(exc).__name__}"
                with self.lock:
                    if what == "ok":
                        self.ok += 1
                    elif what == "truncated":
                        self.truncated += 1
                    else:
                        self.errors += 1
                        self.first_error = self.first_error or what
                        self.error_times.append(time.monotonic())
                if what != "ok":
                    time.sleep(0.05)

    def __enter__(self) -> Streams:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


def part3(args, tmp: Path) -> None:
    from sgltui.client import AgentError, call_sync, spawn_agent

    cfg = tmp / "config"
    (cfg / "sgltui").mkdir(parents=True)
    pool_port = free_port()
    (cfg / "sgltui" / "host.toml").write_text(
        "simulated_gpus = 2\n"
        + "".join(
            f'[[slot]]\nname = "{n}"\ngpus = [{i}]\nport = {free_port()}\n'
            for i, n in enumerate("ab")
        )
        + f'[[pool]]\nname = "all"\nslots = ["a", "b"]\nport = {pool_port}\n'
    )
    profiles = tmp / "profiles"
    profiles.mkdir()
    for name in ("pa", "pb"):
        (profiles / f"{name}.toml").write_text(
            f'name = "{name}"\nlauncher = "sim"\n[server]\nmodel-path = "{MODEL}"\n'
            f"sim-time-scale = 0.2\nmax-running-requests = 64\n"
        )
    state = tmp / "agent-state"
    os.environ.update(XDG_CONFIG_HOME=str(cfg), SGLTUI_STATE_DIR=str(state))
    os.environ["SGLTUI_SIM_GPU_DIR"] = str(tmp / "simgpu")
    spawn_agent(state, [profiles])
    try:
        for _ in range(200):
            try:
                call_sync(state, "ping", autostart=False)
                break
            except AgentError:  # not up yet
                time.sleep(0.1)
        call_sync(state, "start", autostart=False, profile="pa", pool="all", wait=True)
        time.sleep(2)  # the gateway sees both ready
        with Streams(f"http://127.0.0.1:{pool_port}") as s:
            time.sleep(1)
            t0 = time.monotonic()
            res = call_sync(state, "swap", autostart=False, profile="pb", pool="all", wait=True)
            took = time.monotonic() - t0
            time.sleep(1)
        roll = (res.get("result") or {}).get("roll") or {}
        print(
            f"3. rolling swap pa -> pb of a two-slot pool under 8 streaming clients: "
            f"{roll.get('state')} in {took:.1f} s; {s.ok} streams ok, {s.errors} client errors, "
            f"{s.truncated} truncated (goal 0 and 0)"
            + (f"; first error: {s.first_error}" if s.first_error else "")
            + (
                f" from {s.error_times[0] - t0:+.1f} s to {s.error_times[-1] - t0:+.1f} s"
                if s.error_times
                else ""
            )
        )
    finally:
        try:
            call_sync(state, "shutdown", autostart=False, stop_servers=True)
        except AgentError as exc:  # the figures are printed; say why the agent did not stop
            print(f"   (agent shutdown: {exc})")


def part4(args, tmp: Path) -> None:
    a_port, b_port = free_port(), free_port()
    a = start_sim(a_port, 1.0, 64)
    b = start_sim(b_port, 1.0, 64)
    try:

        async def kill(gw):
            import httpx

            with Streams(gw.endpoint) as s:
                await asyncio.sleep(2)
                before = (s.ok, s.errors, s.truncated)
                os.killpg(gw.pid, signal.SIGKILL)
                t0 = time.monotonic()
                async with httpx.AsyncClient(timeout=2) as c:
                    while True:
                        try:
                            r = await c.post(
                                gw.endpoint + "/v1/completions",
                                json={"model": "default", "prompt": "x", "max_tokens": 1},
                            )
                            if r.status_code == 200:
                                break
                        except httpx.HTTPError:
                            pass
                        await asyncio.sleep(0.02)
                back = time.monotonic() - t0
                await asyncio.sleep(2)
            seen = (s.ok - before[0], s.errors - before[1], s.truncated - before[2])
            return back, seen

        back, (ok, err, trunc) = asyncio.run(
            with_gateway([f"http://127.0.0.1:{a_port}", f"http://127.0.0.1:{b_port}"], tmp, kill)
        )
        print(
            f"4. gateway kill -9 under 8 streaming clients: answering again after {back:.2f} s "
            f"(goal <= 5 s); meanwhile clients saw {err} connection errors, {trunc} cut streams, "
            f"{ok} streams ok"
        )
    finally:
        stop_server(a)
        stop_server(b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--running", type=int, default=16, help="max running requests per server")
    ap.add_argument("--parts", default="1234")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as d:
        tmp = Path(d)
        if "1" in args.parts or "2" in args.parts:
            part12(args, tmp)
        if "3" in args.parts:
            part3(args, tmp)
        if "4" in args.parts:
            part4(args, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
