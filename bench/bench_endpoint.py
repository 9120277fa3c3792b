"""The agent endpoint (agent/endpoint/endpoint.py): collation, a wake, idle sleep and a lease, on the
simulator, one slot, two profiles both warm (one serving, one a standby). Issue 46's budgets:

  abab    two clients, one per profile, each sending its requests back to back through the
          endpoint (the arrivals alternate: ABAB), N requests in all: at most one swap per
          collation window ([endpoint] collate_s), 0 failed, and the total time at most 1.3x
          the same requests sent AABB by hand (client A's all, one swap, client B's all);
  wake    one request for the profile asleep: answered within the last warm swap's time + 1 s;
  idle    a profile with `idle_s`: its slot stopped (GPU memory released) within 2 s of idle_s;
  lease   a lease on the serving profile (by hand; a job's is the same lease) holds through 200
          requests for the other: 0 evictions, each request answered 503 or served, counted.

    python bench/bench_endpoint.py [--requests 400] [--collate-s 5] [--max-tokens 64]

Prints the figures, each budget met or over, and PASS/FAIL.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sgltui.client import AgentError, call_sync, spawn_agent  # noqa: E402

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TIME_BUDGET = 1.3  # ABAB with collation / AABB by hand
WAKE_SLACK_S = 1.0
IDLE_SLACK_S = 2.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_profile(d: Path, name: str, port: int, top: str = "") -> None:
    (d / f"{name}.toml").write_text(
        f'name = "{name}"\nlauncher = "sim"\n{top}[server]\nmodel-path = "{MODEL}"\n'
        f"port = {port}\nsim-time-scale = 0.05\n"
    )


async def client(url: str, model: str, n: int, max_tokens: int, out: dict) -> None:
    body = {"model": model, "prompt": "hello", "max_tokens": max_tokens, "ignore_eos": True}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s:
        for _ in range(n):
            try:
                async with s.post(url + "/v1/completions", json=body) as r:
                    await r.read()
                    out[r.status] = out.get(r.status, 0) + 1
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                out[type(exc).__name__] = out.get(type(exc).__name__, 0) + 1


def run(*coros: object) -> float:
    t0 = time.monotonic()

    async def all_of() -> None:
        await asyncio.gather(*coros)  # type: ignore[arg-type]

    asyncio.run(all_of())
    return time.monotonic() - t0


def swaps_done(state: Path) -> int:
    st = call_sync(state, "status")
    return int(st["endpoint"]["swaps"])


def serving(state: Path) -> str | None:
    return call_sync(state, "status")["slots"][0]["profile"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=400, help="ABAB requests, both clients")
    ap.add_argument("--collate-s", type=float, default=5.0)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--keep", action="store_true", help="keep the state dir afterwards")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sgltui-bench-endpoint-"))
    state, profiles = tmp / "state", tmp / "profiles"
    profiles.mkdir(parents=True)
    port = free_port()
    os.environ.update(
        {
            "SGLTUI_SIM_GPU_DIR": str(tmp / "simgpu"),
            "SGLTUI_FRONT_PORT": str(free_port()),
            "SGLTUI_ENDPOINT_PORT": str(port),
            "SGLTUI_ENDPOINT_COLLATE_S": str(args.collate_s),
            "SGLTUI_ENDPOINT_LEASE_WAIT_S": "0.2",
        }
    )
    url = f"http://127.0.0.1:{port}"
    write_profile(profiles, "ep-a", free_port())
    write_profile(profiles, "ep-b", free_port())
    write_profile(profiles, "ep-idle", free_port(), "idle_s = 2\n")
    print(f"state and logs: {tmp}")
    spawn_agent(state, [profiles])
    fails: list[str] = []
    half = args.requests // 2
    try:
        call_sync(state, "start", profile="ep-a", wait=True)
        call_sync(state, "standby_add", profile="ep-b", wait=True)

        # AABB by hand: client A's requests, one swap by hand, client B's
        out: dict = {}
        t0 = time.monotonic()
        run(client(url, "ep-a", half, args.max_tokens, out))
        call_sync(state, "swap", profile="ep-b", wait=True)
        run(client(url, "ep-b", half, args.max_tokens, out))
        by_hand = time.monotonic() - t0
        print(f"AABB by hand: {args.requests} requests in {by_hand:.2f} s (1 swap), {out}")

        # ABAB: both clients at once, the endpoint collates
        out = {}
        before = swaps_done(state)
        took = run(
            client(url, "ep-a", half, args.max_tokens, out),
            client(url, "ep-b", half, args.max_tokens, out),
        )
        swaps = swaps_done(state) - before
        windows = math.ceil(took / args.collate_s)
        failed = sum(v for k, v in out.items() if k != 200)
        ratio = took / by_hand
        print(
            f"ABAB collated: {args.requests} requests in {took:.2f} s ({ratio:.2f}x by hand), "
            f"{swaps} swaps in {windows} windows of {args.collate_s:g} s, {failed} failed"
        )
        if swaps > windows:
            fails.append(f"{swaps} swaps > {windows} collation windows")
        if failed:
            fails.append(f"{failed} failed requests: {out}")
        if ratio > TIME_BUDGET:
            fails.append(f"ABAB took {ratio:.2f}x AABB by hand > {TIME_BUDGET}x")

        # a wake: one request for the profile asleep
        asleep = "ep-a" if serving(state) == "ep-b" else "ep-b"
        t0 = time.monotonic()
        run(client(url, asleep, 1, args.max_tokens, out := {}))
        wake = time.monotonic() - t0
        last = call_sync(state, "status")["slots"][0]["last_swap"]
        print(
            f"wake {asleep}: answered in {wake:.2f} s; the warm swap took {last['seconds']:.2f} s"
        )
        if out != {200: 1} or wake > float(last["seconds"]) + WAKE_SLACK_S:
            fails.append(f"wake: {out}, {wake:.2f} s > swap {last['seconds']:.2f} s + 1 s")

        # a lease: 200 requests for the other profile, none evicts the leased one
        held = serving(state)
        other = "ep-b" if held == "ep-a" else "ep-a"
        call_sync(state, "lease_add", profile=held)
        before = swaps_done(state)
        out = {}
        run(client(url, other, 200, args.max_tokens, out))
        evictions = swaps_done(state) - before
        print(f"lease on {held}: 200 requests for {other}: {out}, {evictions} evictions")
        if evictions or serving(state) != held or sum(out.values()) != 200:
            fails.append(f"lease: {evictions} evictions, answers {out}")
        call_sync(state, "lease_drop", profile=held)

        # idle: ep-idle (idle_s = 2) stopped within 2 s of its idle time
        call_sync(state, "stop", wait=True)
        run(client(url, "ep-idle", 1, args.max_tokens, out := {}))
        t0 = time.monotonic()
        while (
            serving(state) == "ep-idle"
            and call_sync(state, "status")["slots"][0]["state"] != "stopped"
        ):
            if time.monotonic() - t0 > 30:
                break
            time.sleep(0.05)
        idle = time.monotonic() - t0
        print(f"idle: ep-idle (idle_s 2) stopped {idle:.2f} s after its last request")
        if idle > 2 + IDLE_SLACK_S:
            fails.append(f"idle: stopped after {idle:.2f} s > 2 s + {IDLE_SLACK_S} s")
    finally:
        try:
            call_sync(state, "shutdown", autostart=False, stop_servers=True)
        except AgentError as exc:
            print(f"shutdown: {exc}", file=sys.stderr)
        time.sleep(1.0)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    for f in fails:
        print(f"OVER: {f}")
    print("PASS" if not fails else "FAIL")
    return 0 if not fails else 1


if __name__ == "__main__":
    sys.exit(main())
