"""The slot's front endpoint on its own: a Front in this process, real simulators behind it."""

from __future__ import annotations

import asyncio
import json
import signal

import aiohttp
import pytest

from sgltui.agent.pools.front import Front, FrontConfig
from tests.ports import server_port

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BODY = {
    "model": MODEL,
    "prompt": "hello",
    "max_tokens": 24,
    "stream": True,
    "ignore_eos": True,
    "stream_options": {"include_usage": True},
}


async def _front(**cfg) -> Front:
    front = Front("0", "127.0.0.1", server_port(), FrontConfig(**cfg))
    assert await front.start(), front.error
    return front


async def _stream(session: aiohttp.ClientSession, url: str) -> tuple[int, list[str]]:
    """(status, SSE data lines); raises when the stream is cut."""
    async with session.post(url + "/v1/completions", json=BODY) as resp:
        if resp.status != 200:
            await resp.read()
            return resp.status, []
        lines = []
        async for raw in resp.content:
            line = raw.decode().strip()
            if line.startswith("data:"):
                lines.append(line[5:].strip())
        return 200, lines


def _tokens(lines: list[str]) -> int:
    """completion_tokens of the usage chunk the stream ends with."""
    return json.loads(lines[-2])["usage"]["completion_tokens"]


async def test_streams_pass_through_like_direct(sim_server):
    sim = sim_server()
    front = await _front()
    front.route_to("127.0.0.1", sim.port)
    try:
        async with aiohttp.ClientSession() as s:
            status, direct = await _stream(s, sim.url)
            status_f, via = await _stream(s, front.url)
            async with s.get(front.url + "/v1/models") as r:
                models = await r.json()
        assert status == status_f == 200
        assert via[-1] == "[DONE]" and _tokens(via) == _tokens(direct) == 24
        assert models["data"][0]["id"] == MODEL
        assert front.status()["served"] == 2 and front.in_flight() == 0
    finally:
        await front.close()


@pytest.mark.slow
async def test_held_requests_go_to_the_new_server(sim_server):
    old, new = sim_server(), sim_server()
    front = await _front()
    front.route_to("127.0.0.1", old.port)
    try:
        async with aiohttp.ClientSession() as s:
            front.hold()
            pending = [asyncio.ensure_future(_stream(s, front.url)) for _ in range(3)]
            while front.status()["held_now"] < 3:
                await asyncio.sleep(0.01)
            assert front.status()["state"] == "holding"
            assert not any(p.done() for p in pending)
            old.signal(signal.SIGKILL)  # the old server is gone while they wait
            front.route_to("127.0.0.1", new.port)
            results = await asyncio.gather(*pending)
        assert [st for st, _ in results] == [200, 200, 200]
        assert all(lines[-1] == "[DONE]" for _, lines in results)
        assert front.status()["state"] == "routing"
    finally:
        await front.close()


async def test_hold_is_bounded_in_time_and_count(sim_server):
    front = await _front(hold_s=0.3, hold_max=2, retry_after_s=7)
    try:
        front.hold()
        async with aiohttp.ClientSession() as s:
            first = [asyncio.ensure_future(s.get(front.url + "/v1/models")) for _ in range(2)]
            while front.status()["held_now"] < 2:
                await asyncio.sleep(0.01)
            async with s.get(front.url + "/v1/models") as over:  # a third: over the count
                assert over.status == 503 and over.headers["Retry-After"] == "7"
                assert "already holds 2 requests" in (await over.json())["error"]["message"]
            for resp in await asyncio.gather(*first):  # the two held: over the time
                assert resp.status == 503 and resp.headers["Retry-After"] == "7"
                assert "still swapping" in (await resp.json())["error"]["message"]
                resp.release()
        assert front.status()["rejected"] == 3
    finally:
        await front.close()


async def test_release_answers_503_at_once(sim_server):
    front = await _front()
    try:
        front.hold()
        async with aiohttp.ClientSession() as s:
            held = asyncio.ensure_future(s.get(front.url + "/v1/models"))
            while front.status()["held_now"] < 1:
                await asyncio.sleep(0.01)
            front.release("the swap failed and nothing runs")
            resp = await held
            assert resp.status == 503 and "Retry-After" in resp.headers
            assert "the swap failed" in (await resp.json())["error"]["message"]
            resp.release()
        assert front.status()["state"] == "no server"
    finally:
        await front.close()


async def test_killed_server_cuts_the_stream_visibly(sim_server):
    """A stream the server cannot finish must look cut to the client, never complete."""
    # Slow tokens, fast start: the kill lands mid-stream.
    sim = sim_server("--sim-slow-start", "0.05", time_scale="0.2")
    front = await _front()
    front.route_to("127.0.0.1", sim.port)
    try:
        async with aiohttp.ClientSession() as s:
            body = dict(BODY, max_tokens=2000)
            async with s.post(front.url + "/v1/completions", json=body) as resp:
                assert resp.status == 200
                await resp.content.readline()
                assert front.in_flight(("127.0.0.1", sim.port)) == 1
                sim.signal(signal.SIGKILL)
                with pytest.raises(aiohttp.ClientPayloadError):
                    async for _ in resp.content:
                        pass
        assert front.status()["cut"] == 1
    finally:
        await front.close()


async def test_port_in_use_is_one_clear_error():
    front = await _front()
    try:
        second = Front("1", "127.0.0.1", front.port)
        assert not await second.start()
        # the setting to change, in the file it lives in (issue 37: it named an env variable)
        assert "set [front] port in agent.toml" in second.error, second.error
        assert "SGLTUI_" not in second.error and str(front.port) in second.error
        assert second.status()["state"] == "error" and second.status()["url"] is None
    finally:
        await front.close()


def test_config_from_env():
    from sgltui.agent.config import from_env

    assert from_env({}).front.port == 30080
    assert from_env({"SGLTUI_FRONT_PORT": "off"}).front.port is None
    cfg = from_env({"SGLTUI_FRONT_PORT": "4000", "SGLTUI_FRONT_HOLD_S": "9"}).front
    assert (cfg.port, cfg.hold_s) == (4000, 9.0)
