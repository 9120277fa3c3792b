"""Issue 18 #3: a swap under continuous load, through the slot's front endpoint (real agent and
simulators), and an honest record of a stop that had to SIGKILL."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request

import aiohttp
import pytest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
TOKENS = 64
# Tokens slow enough that streams are in flight when the swap starts, start-up still fast.
SLOW_TOKENS = {"time_scale": 0.2, "sim_slow_start": 0.05}


async def _client(url: str, stop: threading.Event, out: dict) -> None:
    """One client sending streaming completions back to back until told to stop."""
    body = {
        "model": MODEL,
        "prompt": "tell me a story",
        "max_tokens": TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        while not stop.is_set():
            out["sent"] += 1
            try:
                async with s.post(url + "/v1/completions", json=body) as resp:
                    if resp.status != 200:
                        out["errors"].append(f"HTTP {resp.status}: {(await resp.read())[:200]!r}")
                        continue
                    data = [
                        ln[5:].strip()
                        for raw in [line async for line in resp.content]
                        if (ln := raw.decode().strip()).startswith("data:")
                    ]
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                out["errors"].append(repr(exc))
                continue
            usage = json.loads(data[-2]).get("usage") if len(data) >= 2 else None
            if data[-1:] != ["[DONE]"] or not usage or usage["completion_tokens"] != TOKENS:
                out["truncated"] += 1
            else:
                out["ok"] += 1


class Load:
    """N streaming clients in a thread of their own (the agent fixture's calls are blocking)."""

    def __init__(self, url: str, clients: int = 4) -> None:
        self.stop = threading.Event()
        self.out = {"sent": 0, "ok": 0, "truncated": 0, "errors": []}
        self.thread = threading.Thread(target=asyncio.run, args=(self._run(url, clients),))
        self.thread.start()

    async def _run(self, url: str, clients: int) -> None:
        await asyncio.gather(*(_client(url, self.stop, self.out) for _ in range(clients)))

    def wait_ok(self, more: int, timeout: float = 60.0) -> None:
        target, deadline = self.out["ok"] + more, time.monotonic() + timeout
        while self.out["ok"] < target:
            assert time.monotonic() < deadline, f"load stalled: {self.out}"
            assert not self.out["errors"], self.out
            time.sleep(0.05)

    def finish(self) -> dict:
        self.stop.set()
        self.thread.join(timeout=150)
        return self.out


def test_swap_under_four_streaming_clients_loses_nothing(agent):
    a = agent.write_profile("front-a", **SLOW_TOKENS)
    b = agent.write_profile("front-b", **SLOW_TOKENS)
    agent.call("start", profile=a, wait=True)
    front = agent.slot()["front"]
    assert front["url"] == agent.front_url and front["state"] == "routing"
    assert front["backend"] == f"http://127.0.0.1:{agent.ports[a]}"

    load = Load(agent.front_url)
    try:
        load.wait_ok(8)  # the load is on before the first swap
        for target in (b, a):  # two swaps, one each way
            res = agent.call("swap", profile=target, wait=True)
            assert res["slot"]["state"] == "ready" and res["slot"]["profile"] == target, res
            load.wait_ok(8)  # and stays on after it
    finally:
        out = load.finish()

    assert out["errors"] == [] and out["truncated"] == 0, out
    assert out["ok"] == out["sent"] >= 24
    slot = agent.slot()
    assert slot["front"]["url"] == agent.front_url  # the same port across both swaps
    assert slot["front"]["backend"] == f"http://127.0.0.1:{agent.ports[a]}"
    assert slot["front"]["held_now"] == 0 and slot["front"]["held"] > 0
    # Drain stops admissions: the old server emptied and exited on SIGTERM, no timeout hit.
    assert slot["last_stop"]["signal"] == "SIGTERM"
    assert not slot["last_stop"]["drain_timed_out"]
    stops = [e for e in agent.events("slot.state") if e["state"] == "stopped"]
    assert len(stops) == 2 and all("SIGTERM" in e["reason"] and not e["cause"] for e in stops)
    routes = [e["backend"] for e in agent.events("front.route")]
    assert routes[-2:] == [
        f"http://127.0.0.1:{agent.ports[b]}",
        f"http://127.0.0.1:{agent.ports[a]}",
    ]


def test_stop_that_sigkills_says_so_with_the_requests_it_cut(agent):
    a = agent.write_profile("front-slow", **SLOW_TOKENS)
    agent.call("start", profile=a, wait=True)
    url = f"http://127.0.0.1:{agent.ports[a]}"  # direct: the front cannot hold these back
    body = {"model": MODEL, "prompt": "x", "max_tokens": 20000, "ignore_eos": True, "stream": True}
    started, release = threading.Event(), threading.Event()

    async def two_long_streams() -> None:
        async with aiohttp.ClientSession() as s:
            streams = [await s.post(url + "/v1/completions", json=body) for _ in range(2)]
            for r in streams:
                await r.content.readline()
            started.set()
            while not release.is_set():
                await asyncio.sleep(0.05)
            for r in streams:
                r.close()

    thread = threading.Thread(target=asyncio.run, args=(two_long_streams(),))
    thread.start()
    try:
        assert started.wait(30)
        t0 = time.monotonic()
        res = agent.call("stop", drain="force", wait=True)
        took = time.monotonic() - t0
    finally:
        release.set()
        thread.join(30)
    assert res["slot"]["state"] == "stopped"
    last = res["slot"]["last_stop"]
    assert last["signal"] == "SIGKILL" and last["requests_at_sigkill"] == 2, last
    assert last["requests_at_sigterm"] == 2
    assert took < 30
    ev = [e for e in agent.events("slot.state") if e["state"] == "stopped"][-1]
    assert "SIGKILL" in ev["reason"] and "2 requests still running were cut" in ev["reason"]
    assert ev["cause"]["kind"] == "signal" and ev["cause"]["exit_code"] == -9
    assert res["result"]["report"]["signal"] == "SIGKILL"
    # Nothing is coming back: the front says so at once, with when to retry.
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(agent.front_url + "/v1/models", timeout=10)
    assert err.value.code == 503 and err.value.headers["Retry-After"]
    assert "no server runs on this slot (stopped" in err.value.read().decode()


def test_failed_swap_rolls_back_and_held_requests_reach_the_old_profile(agent):
    a = agent.write_profile("front-ok", **SLOW_TOKENS)
    bad = agent.write_profile("front-bad", sim_fail_at_start="cuda", **SLOW_TOKENS)
    agent.call("start", profile=a, wait=True)
    load = Load(agent.front_url)
    try:
        load.wait_ok(8)
        res = agent.call("swap", profile=bad, wait=True)
        assert res["result"]["rolled_back"] and res["slot"]["profile"] == a, res
        load.wait_ok(8)
    finally:
        out = load.finish()
    assert out["errors"] == [] and out["truncated"] == 0 and out["ok"] == out["sent"], out
    assert agent.slot()["front"]["state"] == "routing"


def test_front_before_start_says_how_and_holds_during_a_launch(agent):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(agent.front_url + "/v1/models", timeout=10)
    assert err.value.code == 503 and "sgltui start" in err.value.read().decode()
    a = agent.write_profile("front-first", **SLOW_TOKENS)
    agent.call("start", profile=a, wait=False)
    # Sent while the server is still launching: answered once it is ready, not refused.
    with urllib.request.urlopen(agent.front_url + "/v1/models", timeout=60) as resp:
        assert resp.status == 200 and json.loads(resp.read())["data"]
    assert agent.slot()["state"] == "ready"
    held = [e for e in agent.events("front.route") if e["held"]]
    assert held, agent.events("front.route")
