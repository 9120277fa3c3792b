"""The pool's gateway: the real smg (PyPI smg) in front of real simulator processes
(sgltui/agent/pools/gateway.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import sys
import time

import httpx
import pytest

from sgltui import protocol
from sgltui.agent.pools import gateway, gateway_launch
from sgltui.agent.pools.gateway import Gateway, GatewayError

pytestmark = [
    pytest.mark.skipif(not gateway.smg_available(), reason="smg not installed"),
    pytest.mark.slow,  # a real gateway (smg) and servers
]

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gateway(tmp_path, **kw) -> Gateway:
    return Gateway(
        "all",
        host="127.0.0.1",
        port=_port(),
        prometheus_port=_port(),
        state_dir=tmp_path / "state",
        model=MODEL,
        **kw,
    )


async def _complete(client, gw, model="default", stream=False, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": model, "prompt": "hello", "max_tokens": 4, "stream": stream}
    return await client.post(gw.endpoint + "/v1/completions", json=body, headers=headers)


def _group_argv(pid: int) -> str:
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.getpgid(int(p)) != pid:
                continue
            with open(f"/proc/{p}/cmdline", "rb") as fh:
                out.append(fh.read().decode(errors="replace"))
        except (OSError, ProcessLookupError):
            continue
    return "\n".join(out)


async def test_two_workers_serve_default_and_the_real_name_and_keys_stay_out_of_argv(
    sim_server, tmp_path
):
    a, b = sim_server(), sim_server()
    gw = _gateway(tmp_path)
    await gw.start([a.url, b.url])
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            for model in ("default", MODEL):
                r = await _complete(client, gw, model)
                assert r.status_code == 200, r.text
                assert r.json()["model"] == MODEL
            r = await _complete(client, gw, stream=True)
            assert r.status_code == 200 and "[DONE]" in r.text
            # Nobody but the agent manages workers.
            r = await client.get(gw.endpoint + "/workers")
            assert r.status_code == 401
            r = await client.post(gw.endpoint + "/workers", json={"url": "http://127.0.0.1:1"})
            assert r.status_code == 401
        ws = await gw.workers()
        assert sorted(w.url for w in ws) == sorted([a.url, b.url])
        assert all(w.status == "ready" for w in ws)
        assert stat.S_IMODE(gw.key_path.stat().st_mode) == 0o600
        key = json.loads(gw.key_path.read_text())["control_plane_key"]
        assert key not in _group_argv(gw.pid)
        sample = await gw.sample()
        assert sample.pid == gw.pid and sample.state == "running"
        assert sorted(w.url for w in sample.workers) == sorted([a.url, b.url])
    finally:
        await gw.stop()
    assert gw.pid is None and not gw.key_path.exists()


async def test_remove_wait_for_in_flight_then_add_back(sim_server, tmp_path):
    a = sim_server()
    b = sim_server("--sim-time-scale", "0.05")
    gw = _gateway(tmp_path, policy="round_robin")
    await gw.start([a.url, b.url])
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            # A long stream lands on one of the two; remove b and wait for its own count.
            body = {"model": "default", "prompt": "x", "max_tokens": 200, "stream": True}
            streams = [
                asyncio.ensure_future(client.post(b.url + "/v1/completions", json=body))
                for _ in range(2)
            ]
            deadline = time.monotonic() + 10
            while await gateway.worker_in_flight(b.url) == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert await gw.remove_worker(b.url)
            assert await gw.routable() >= 1  # a stays routable throughout
            drained, left = await gateway.wait_in_flight_zero(b.url, timeout=30)
            assert drained, left
            for s in streams:
                assert "[DONE]" in (await s).text
            for _ in range(4):  # every new request goes to a now
                assert (await _complete(client, gw)).status_code == 200
            await gw.add_worker(b.url)
            assert await gw.wait_ready(b.url, timeout=15)
            assert gw.urls == [a.url, b.url]
    finally:
        await gw.stop()


async def test_stop_lets_a_request_in_flight_through_it_finish(sim_server, tmp_path):
    """The gateway's stop waits for what it proxies (smg's own 5 s settle it does not): a
    stream running through it when the pool stops ends with its [DONE]."""
    # Tokens at full speed (300 take ~2 s), a start-up at a fiftieth of it.
    slow = sim_server("--sim-time-scale", "1", "--sim-slow-start", "0.02")
    gw = _gateway(tmp_path)
    await gw.start([slow.url])
    async with httpx.AsyncClient(timeout=60) as client:
        body = {"model": "default", "prompt": "x", "max_tokens": 300, "stream": True}
        stream = asyncio.ensure_future(client.post(gw.endpoint + "/v1/completions", json=body))
        deadline = time.monotonic() + 10
        while await gateway.worker_in_flight(slow.url) == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await gateway.worker_in_flight(slow.url) == 1
        await gw.stop(grace=30.0)
        assert stream.done()  # the stop waited for it
        r = await stream
        assert r.status_code == 200 and "[DONE]" in r.text
    assert gw.pid is None


async def test_kill_9_of_the_gateway_comes_back_with_the_current_workers(sim_server, tmp_path):
    a, b = sim_server(), sim_server()
    events = []
    gw = _gateway(
        tmp_path, on_change=lambda event: events.append(protocol.event_dict(event)["type"])
    )
    await gw.start([a.url])
    try:
        await gw.add_worker(b.url)
        assert await gw.wait_ready(b.url, timeout=15)
        old = gw.pid
        os.killpg(old, signal.SIGKILL)
        t0 = time.monotonic()
        async with httpx.AsyncClient(timeout=5) as client:
            while True:
                try:
                    if (await _complete(client, gw)).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                # The 5 s budget is measured by bench/bench_pool.py, not asserted here (a loaded
                # CI machine must not fail the suite on a timing); this waits for it to be back.
                assert time.monotonic() - t0 < 60.0, "the gateway did not come back in 60 s"
                await asyncio.sleep(0.05)
        back = time.monotonic() - t0
        while gw.restarts == 0 and time.monotonic() - t0 < 15:
            await asyncio.sleep(0.05)  # it answered; the agent's view follows
        assert gw.pid not in (None, old) and gw.restarts == 1
        assert events == ["gateway.died", "gateway.restarted"]
        ws = await gw.workers()
        assert sorted(w.url for w in ws) == sorted([a.url, b.url]), back
    finally:
        await gw.stop()


async def test_the_profile_api_key_is_asked_of_clients_and_sent_to_workers(sim_server, tmp_path):
    a = sim_server("--api-key", "k-123")
    gw = _gateway(tmp_path, api_key="k-123")
    await gw.start([a.url])
    try:
        assert await gw.wait_ready(a.url, timeout=15)
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await _complete(client, gw)).status_code == 401
            assert (await _complete(client, gw, key="k-123")).status_code == 200
        assert "k-123" not in _group_argv(gw.pid)
        assert (await gateway.wait_in_flight_zero(a.url, 10, "k-123"))[0]
        assert await gateway.worker_in_flight(a.url) is None  # its /v1/loads asks for the key
    finally:
        await gw.stop()


async def test_a_taken_port_and_a_missing_smg_are_one_line_each(tmp_path, monkeypatch):
    gw = _gateway(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", gw.port))
        s.listen()
        with pytest.raises(GatewayError, match=f"port {gw.port} .* is taken"):
            await gw.start([])
    assert gw.proc is None
    monkeypatch.setattr(gateway, "smg_available", lambda: False)
    with pytest.raises(GatewayError, match=r"no gateway: pip install smg"):
        await gw.start([])
    key = tmp_path / "k.json"
    key.write_text("{}")
    monkeypatch.setitem(sys.modules, "smg.cli", None)
    assert gateway_launch.main([str(key), "--"]) == 3


def test_metrics_parse_into_a_typed_sample():
    text = """# TYPE smg_worker_requests_active gauge
smg_worker_requests_active{worker="http://a"} 3
smg_worker_cb_state{worker="http://a"} 1
smg_worker_cb_state{worker="http://b"} 0
smg_worker_health{worker="http://b"} 0
smg_worker_retries_total{worker_type="regular",endpoint="generate"} 2
smg_worker_retries_total{worker_type="regular",endpoint="chat"} 1
smg_router_request_errors_total{route="x"} 4
"""
    s = gateway.parse_metrics(text, pool="all", pid=1, state="running", restarts=0)
    a, b = s.workers
    assert (a.url, a.requests_active, a.cb_state) == ("http://a", 3, "open")
    assert (b.url, b.healthy, b.cb_state) == ("http://b", False, "closed")
    assert (s.retries_total, s.errors_total) == (3, 4)
    assert gateway.parse_metrics("garbage{", pool="p", pid=None, state="stopped", restarts=0)


async def test_a_gateway_left_by_a_killed_agent_is_ended_by_the_next(sim_server, tmp_path):
    a = sim_server()
    first = _gateway(tmp_path)
    await first.start([a.url])
    old = first.pid
    # The agent dies (kill -9): its gateway lives on, holding the pool's port.
    first._stopping = True  # only its watcher stops, as with a dead agent
    nxt = Gateway(
        "all",
        host="127.0.0.1",
        port=first.port,
        prometheus_port=_port(),
        state_dir=tmp_path / "state",
        model=MODEL,
    )
    try:
        await nxt.start([a.url])
        assert nxt.pid not in (None, old)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and first.proc.poll() is None:
            await asyncio.sleep(0.05)
        assert first.proc.poll() is not None
    finally:
        await nxt.stop()
        await first.stop()


async def test_a_left_gateway_that_cannot_be_taken_over_is_ended_and_the_log_says_why(
    sim_server, tmp_path, caplog
):
    a = sim_server()
    first = _gateway(tmp_path)
    await first.start([a.url])
    old = first.pid
    first._stopping = True  # only its watcher stops, as with a dead agent
    # The next agent's pool has another port now (host.toml edited): not the same gateway.
    nxt = _gateway(tmp_path)
    try:
        with caplog.at_level("WARNING", logger="sgltui.agent.pools.gateway"):
            assert not await nxt.adopt()
        assert f"ending smg pid {old} left by an earlier agent (it listens on port" in (caplog.text)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and first.proc.poll() is None:
            await asyncio.sleep(0.05)
        assert first.proc.poll() is not None and nxt.pid is None
    finally:
        await nxt.stop()
        await first.stop()
