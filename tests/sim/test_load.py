"""Many concurrent streams at --sim-time-scale 0 (what the load generator's benchmarks do).

Regression: with a few hundred streams arriving at once, the main process blocked in a pipe write
to its scheduler while the scheduler blocked writing tokens back, and the server froze (no more
tokens, no /v1/loads, no /health). The client here has a hard time limit, so a freeze fails the
test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import aiohttp
import pytest

STREAMS = 512
OUTPUT_LEN = 64
LIMIT_S = 60.0


async def _drive(url: str) -> dict:
    done: list[int] = []
    peak = 0
    stop = asyncio.Event()

    async def poll(session: aiohttp.ClientSession) -> None:
        nonlocal peak
        while not stop.is_set():
            try:
                async with session.get(
                    url + "/v1/loads", timeout=aiohttp.ClientTimeout(total=5)
                ) as r:
                    peak = max(peak, (await r.json())["loads"][0]["num_running_reqs"])
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass
            await asyncio.sleep(0.05)

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        body = {
            "model": "m",
            "prompt": f"request {i}: tell me a story",
            "max_tokens": OUTPUT_LEN,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tokens, finished = None, False
        async with session.post(url + "/v1/completions", json=body) as r:
            assert r.status == 200, await r.text()
            async for line in r.content:
                if line.startswith(b"data: [DONE]"):
                    finished = True
                elif line.startswith(b"data: "):
                    usage = json.loads(line[6:]).get("usage")
                    if usage:
                        tokens = usage["completion_tokens"]
        assert finished and tokens == OUTPUT_LEN, (i, finished, tokens)
        done.append(i)

    connector = aiohttp.TCPConnector(limit=STREAMS + 8)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None)
    ) as session:
        poller = asyncio.create_task(poll(session))
        t0 = time.monotonic()
        try:
            await asyncio.wait_for(
                asyncio.gather(*(one(session, i) for i in range(STREAMS))), LIMIT_S
            )
            timed_out = False
        except asyncio.TimeoutError:
            timed_out = True
        wall = time.monotonic() - t0
        stop.set()
        await poller
    return {"done": len(done), "peak": peak, "wall": wall, "timed_out": timed_out}


@pytest.mark.slow
def test_hundreds_of_concurrent_streams_at_time_scale_zero(sim_server):
    sim = sim_server(
        "--sim-time-scale",
        "0",
        "--sim-gpu",
        "h200-141gb",
        "--max-running-requests",
        "2048",
        "--enable-metrics",
    )
    r = asyncio.run(_drive(sim.url))
    assert not r["timed_out"], (
        f"server froze: {r['done']}/{STREAMS} streams finished in {LIMIT_S:.0f} s "
        f"(peak running {r['peak']})\n" + "\n".join(sim.lines()[-10:])
    )
    assert r["done"] == STREAMS
    # The running batch really grew far past 64: polled /v1/loads, and the scheduler's batch log lines.
    logged = [
        int(m.group(1)) for m in map(re.compile(r"#running-req: (\d+)").search, sim.lines()) if m
    ]
    peak = max([r["peak"], *logged])
    assert peak >= STREAMS // 2, (r, logged[-5:])
    # Still healthy and serving after the burst.
    metrics = asyncio.run(_get(sim.url + "/metrics"))
    total = sum(
        float(m.group(1))
        for m in re.finditer(r"^sglang:generation_tokens_total\{[^}]*\} (\S+)$", metrics, re.M)
    )
    assert total >= STREAMS * OUTPUT_LEN


async def _get(url: str) -> str:
    async with aiohttp.ClientSession() as s:
        async with s.get(url, timeout=aiohttp.ClientTimeout(total=10)) as r:
            assert r.status == 200
            return await r.text()
