"""A slot's front endpoint: what a swap adds to latency, and what the front costs per token.

One run, a real agent and simulator profiles (issue 18 #3):
  overhead  C streaming clients against the server directly and through the front, in
            alternating rounds of the same length: time per output token (TPOT), time to
            first token and tokens/s through the front over direct, and the agent's CPU per
            streamed token through the front (less its own CPU while the clients went direct);
  swap      C clients send back to back through the front while the slot swaps A -> B -> A ...
            Requests that overlap a swap (held at the front, or draining on the old server) vs
            those that do not (steady state): end-to-end latency p50/p99 and their ratios, plus
            every request lost (an error) or stream truncated, which must be 0.

    python bench/bench_front_swap.py [--clients 4] [--seconds 4] [--rounds 2] [--swaps 3]

Prints the figures and PASS/FAIL: FAIL when any request was lost or truncated, or when the
front's TPOT is more than 1.10x going direct.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sgltui.client import AgentError, call_sync, spawn_agent  # noqa: E402

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TPOT_BUDGET = 1.10  # front TPOT / direct TPOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_profile(d: Path, name: str, port: int, scale: float) -> None:
    # Tokens at `scale` (a streamed cadence a person would see), start-up kept short.
    slow_start = min(1.0, 0.01 / scale)
    (d / f"{name}.toml").write_text(
        f'name = "{name}"\nlauncher = "sim"\n[server]\nmodel-path = "{MODEL}"\nport = {port}\n'
        f"sim-time-scale = {scale}\nsim-slow-start = {slow_start}\n"
    )


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


class Record:
    __slots__ = ("start", "end", "ttft", "tokens", "ok", "error")

    def __init__(self, start: float) -> None:
        self.start, self.end, self.ttft, self.tokens = start, 0.0, None, 0
        self.ok, self.error = False, None

    @property
    def latency(self) -> float:
        return self.end - self.start

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.tokens < 2:
            return None
        return (self.latency - self.ttft) / (self.tokens - 1)


async def one_request(s: aiohttp.ClientSession, url: str, body: dict, max_tokens: int) -> Record:
    rec = Record(time.monotonic())
    try:
        async with s.post(url + "/v1/completions", json=body) as resp:
            if resp.status != 200:
                rec.error = f"HTTP {resp.status}"
                await resp.read()
            else:
                last = done = None
                async for raw in resp.content:
                    if not raw.startswith(b"data:"):
                        continue
                    if rec.ttft is None:
                        rec.ttft = time.monotonic() - rec.start
                    data = raw[5:].strip()
                    if data == b"[DONE]":
                        done = True
                    else:
                        last = data
                usage = json.loads(last).get("usage") if last else None
                rec.tokens = (usage or {}).get("completion_tokens") or 0
                rec.ok = bool(done) and rec.tokens == max_tokens
                if not rec.ok:
                    rec.error = "truncated"
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        rec.error = type(exc).__name__
    rec.end = time.monotonic()
    return rec


async def clients(url: str, n: int, stop: threading.Event, out: list, max_tokens: int) -> None:
    body = {
        "model": MODEL,
        "prompt": "Write a short story about a lighthouse keeper.",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    async def loop(s: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            out.append(await one_request(s, url, body, max_tokens))

    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as s:
        await asyncio.gather(*(loop(s) for _ in range(n)))


def run_load(url: str, n: int, seconds: float, max_tokens: int) -> list[Record]:
    stop, out = threading.Event(), []
    t = threading.Thread(target=asyncio.run, args=(clients(url, n, stop, out, max_tokens),))
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=4.0, help="length of one overhead round")
    ap.add_argument("--rounds", type=int, default=2, help="direct/front round pairs")
    ap.add_argument("--swaps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--time-scale", type=float, default=0.2, help="simulator token timing")
    ap.add_argument("--keep", action="store_true", help="keep the state dir afterwards")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="sgltui-bench-front-"))
    state, profiles = tmp / "state", tmp / "profiles"
    profiles.mkdir(parents=True)
    os.environ["SGLTUI_SIM_GPU_DIR"] = str(tmp / "simgpu")
    os.environ["SGLTUI_FRONT_PORT"] = str(free_port())
    front_url = f"http://127.0.0.1:{os.environ['SGLTUI_FRONT_PORT']}"
    ports = {"bench-a": free_port(), "bench-b": free_port()}
    for name, port in ports.items():
        write_profile(profiles, name, port, args.time_scale)
    print(f"state and logs: {tmp}")

    spawn_agent(state, [profiles])
    agent = None
    try:
        call_sync(state, "start", profile="bench-a", wait=True)
        st = call_sync(state, "status")
        agent = psutil.Process(st["agent"]["pid"])
        assert st["slots"][0]["front"]["url"] == front_url, st["slots"][0]["front"]
        direct_url = f"http://127.0.0.1:{ports['bench-a']}"

        # ---- overhead: direct vs front, alternating rounds --------------------------------
        run_load(direct_url, args.clients, 1.0, args.max_tokens)  # warm-up
        runs: dict[str, list[Record]] = {"direct": [], "front": []}
        cpu: dict[str, float] = {"direct": 0.0, "front": 0.0}
        for _ in range(args.rounds):
            for kind, url in (("direct", direct_url), ("front", front_url)):
                c0 = sum(agent.cpu_times()[:2])
                runs[kind] += run_load(url, args.clients, args.seconds, args.max_tokens)
                cpu[kind] += sum(agent.cpu_times()[:2]) - c0

        # ---- swaps under load through the front ---------------------------------------------
        stop, records = threading.Event(), []
        t = threading.Thread(
            target=asyncio.run,
            args=(clients(front_url, args.clients, stop, records, args.max_tokens),),
        )
        t.start()
        windows, timings = [], []
        time.sleep(2.0)
        for i in range(args.swaps):
            target = "bench-b" if i % 2 == 0 else "bench-a"
            t0 = time.monotonic()
            res = call_sync(state, "swap", profile=target, wait=True)
            windows.append((t0, time.monotonic()))
            assert res["slot"]["state"] == "ready", res
            timings.append(res["result"]["timings_s"])
            time.sleep(2.0)
        stop.set()
        t.join()
        slot = call_sync(state, "status")["slots"][0]
    finally:
        try:
            call_sync(state, "shutdown", autostart=False, stop_servers=True)
        except AgentError as exc:
            print(f"shutdown: {exc}", file=sys.stderr)
        if not args.keep:
            # The agent stops the servers before it exits and writes until then.
            if agent is not None:
                try:
                    agent.wait(timeout=30)
                except psutil.Error:
                    pass
            shutil.rmtree(tmp, ignore_errors=True)

    # ---- figures ----------------------------------------------------------------------------
    def stat(recs: list[Record], attr: str) -> list[float]:
        return [v for r in recs if r.ok and (v := getattr(r, attr)) is not None]

    d, f = runs["direct"], runs["front"]
    d_tok, f_tok = sum(r.tokens for r in d), sum(r.tokens for r in f)
    secs = args.rounds * args.seconds
    tpot_ratio = statistics.median(stat(f, "tpot")) / statistics.median(stat(d, "tpot"))
    ttft_ratio = statistics.median(stat(f, "ttft")) / statistics.median(stat(d, "ttft"))
    tps_ratio = (f_tok / secs) / (d_tok / secs)
    front_us_tok = max(0.0, cpu["front"] / max(f_tok, 1) - cpu["direct"] / max(d_tok, 1)) * 1e6
    print(f"\noverhead: {args.clients} clients, {args.rounds} x {args.seconds:.0f} s each way")
    print(f"  requests        direct {len(d):>6}   front {len(f):>6}")
    print(
        f"  TPOT p50        direct {statistics.median(stat(d, 'tpot')) * 1e3:8.3f} ms"
        f"   front {statistics.median(stat(f, 'tpot')) * 1e3:8.3f} ms   ratio {tpot_ratio:.3f}"
    )
    print(
        f"  TTFT p50        direct {statistics.median(stat(d, 'ttft')) * 1e3:8.2f} ms"
        f"   front {statistics.median(stat(f, 'ttft')) * 1e3:8.2f} ms   ratio {ttft_ratio:.3f}"
    )
    print(
        f"  tokens/s        direct {d_tok / secs:8.0f}      front {f_tok / secs:8.0f}      "
        f"ratio {tps_ratio:.3f}"
    )
    print(f"  agent CPU per streamed token through the front: {front_us_tok:.1f} us")

    def overlaps(r: Record) -> bool:
        return any(r.start < b and r.end > a for a, b in windows)

    during = [r for r in records if overlaps(r)]
    steady = [r for r in records if not overlaps(r)]
    lost = [r for r in records if r.error and r.error != "truncated"]
    cut = [r for r in records if r.error == "truncated"]
    sl, dl = stat(steady, "latency"), stat(during, "latency")
    swap_s = [b - a for a, b in windows]
    print(f"\nswaps: {args.swaps} under {args.clients} streaming clients through {front_url}")
    print(
        f"  swap took (median) {statistics.median(swap_s):.2f} s  {[round(x, 2) for x in swap_s]}"
    )
    for k in ("drain", "stop", "memory_release", "load"):
        print(
            f"    step {k:<15} median {statistics.median(x.get(k) or 0.0 for x in timings):.3f} s"
        )
    print(f"  requests        {len(records)} ({len(during)} overlapped a swap)")
    print(f"  lost            {len(lost)}   truncated {len(cut)}")
    print(
        f"  latency steady  p50 {pct(sl, 50) * 1e3:8.1f} ms  p99 {pct(sl, 99) * 1e3:8.1f} ms\n"
        f"  latency swap    p50 {pct(dl, 50) * 1e3:8.1f} ms  p99 {pct(dl, 99) * 1e3:8.1f} ms\n"
        f"  swap / steady   p50 {pct(dl, 50) / pct(sl, 50):8.2f} x   p99 {pct(dl, 99) / pct(sl, 99):8.2f} x"
        f"   (added p50 {(pct(dl, 50) - pct(sl, 50)) * 1e3:.0f} ms, p99 {(pct(dl, 99) - pct(sl, 99)) * 1e3:.0f} ms)"
    )
    last = slot.get("last_stop") or {}
    print(
        f"  front: held {slot['front']['held']}, rejected {slot['front']['rejected']}, "
        f"cut {slot['front']['cut']}; last stop {last.get('signal')}, "
        f"drain timed out: {last.get('drain_timed_out')}"
    )
    ok = not lost and not cut and tpot_ratio <= TPOT_BUDGET
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
