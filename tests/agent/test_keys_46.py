"""Issue 46 item 6: a front and a pool's gateway ask for the API key of the profile they route
to, and a swap or a roll to a keyed profile closes the door before the first request reaches it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from itertools import groupby

import aiohttp
import httpx
import pytest
from aiohttp import web

from sgltui.agent.jobs.batch_api import BatchApi, BatchStore
from sgltui.agent.pools import gateway
from sgltui.agent.pools.front import Front, FrontConfig, Keys
from tests.ports import server_port

BODY = {"model": "default", "prompt": "hi", "max_tokens": 2}
KEY = {"Authorization": "Bearer sekret"}


async def _recording_server() -> tuple[web.AppRunner, int, list[str]]:
    """A stand-in server that answers 200 to anything and records what reached it."""
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization") or "no key")
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = server_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port, seen


async def test_a_held_request_without_the_key_never_reaches_the_keyed_server(tmp_path):
    old_runner, old_port, old_seen = await _recording_server()
    new_runner, new_port, new_seen = await _recording_server()
    store = BatchStore(tmp_path / "batches")
    front = Front(
        "0",
        "127.0.0.1",
        server_port(),
        FrontConfig(hold_s=10),
        routes=BatchApi(store, None, slot="0").routes(),  # type: ignore[arg-type]
    )
    assert await front.start(), front.error
    try:
        front.route_to("127.0.0.1", old_port)  # a keyless profile
        async with aiohttp.ClientSession() as s:
            async with s.post(front.url + "/v1/completions", json=BODY) as r:
                assert r.status == 200
            async with s.get(front.url + "/v1/batches") as r:
                assert r.status == 200
            front.hold("a swap to a keyed profile")
            held = [
                asyncio.ensure_future(s.post(front.url + "/v1/completions", json=BODY)),
                asyncio.ensure_future(
                    s.post(front.url + "/v1/completions", json=BODY, headers=KEY)
                ),
                asyncio.ensure_future(s.get(front.url + "/v1/batches")),  # answered by the front
            ]
            await asyncio.sleep(0.2)
            assert front.status()["held_now"] == 3
            front.route_to("127.0.0.1", new_port, Keys("sekret"))
            no_key, with_key, batches = await asyncio.gather(*held)
            assert no_key.status == 401 and await no_key.json() == {"error": "Unauthorized"}
            assert with_key.status == 200
            assert batches.status == 401  # the front's own routes ask for it too
            assert new_seen == ["Bearer sekret"]  # the keyless one never reached the new server
            async with s.get(front.url + "/health") as r:
                assert r.status == 200  # SGLang keeps /health open: so does the front
            async with s.get(front.url + "/v1/batches", headers={"x-api-key": "sekret"}) as r:
                assert r.status == 200  # SGLang's other way to send it
            # a swap back to the keyless profile opens the door again
            front.hold("a swap back")
            front.route_to("127.0.0.1", old_port)
            async with s.post(front.url + "/v1/completions", json=BODY) as r:
                assert r.status == 200
            assert old_seen == ["no key", "no key"]
    finally:
        await front.close()
        await old_runner.cleanup()
        await new_runner.cleanup()


@pytest.mark.slow
def test_a_front_swap_to_a_keyed_profile_asks_for_its_key_and_back(agent):
    a = agent.write_profile("k-open")
    b = agent.write_profile("k-keyed", api_key="sekret")
    url = agent.front_url
    agent.call("start", profile=a, wait=True)
    assert httpx.get(url + "/v1/batches").status_code == 200
    agent.call("swap", profile=b, wait=True)
    for r in (httpx.post(url + "/v1/completions", json=BODY), httpx.get(url + "/v1/batches")):
        assert r.status_code == 401 and r.json() == {"error": "Unauthorized"}, r.text
    assert httpx.post(url + "/v1/completions", json=BODY, headers=KEY).status_code == 200
    assert httpx.get(url + "/v1/batches", headers=KEY).status_code == 200
    agent.call("swap", profile=a, wait=True)
    assert httpx.get(url + "/v1/batches").status_code == 200


@pytest.mark.slow
@pytest.mark.skipif(not gateway.smg_available(), reason="smg not installed")
def test_a_roll_to_a_keyed_profile_never_serves_its_workers_without_the_key(agent_handle):
    from tests.agent.test_pool import _host_toml, _pool_call, _wait_workers

    agent = agent_handle
    port = server_port()
    _host_toml(agent, port)
    endpoint = f"http://127.0.0.1:{port}"
    a = agent.write_profile("p-open")
    b = agent.write_profile("p-keyed", api_key="sekret", served_model_name="keyed")
    agent.start()
    _pool_call(agent, "start", profile=a, pool="all", wait=True)
    _wait_workers(agent, ["ready", "ready"])
    # A client without the key asks for the keyed profile's model all through the roll: it
    # must never be served (before the roll no worker serves that model: 404).
    seen: list[int] = []
    stop = threading.Event()

    def probe() -> None:
        body = {**BODY, "model": "keyed"}
        with httpx.Client(timeout=10) as c:
            while not stop.is_set():
                try:
                    seen.append(c.post(endpoint + "/v1/completions", json=body).status_code)
                except httpx.HTTPError:
                    seen.append(0)  # the gateway restarting with the key
                time.sleep(0.05)

    t = threading.Thread(target=probe)
    t.start()
    try:
        res = _pool_call(agent, "swap", profile=b, pool="all", wait=True)
    finally:
        stop.set()
        t.join(timeout=15)
    assert res["pool"]["roll"]["state"] == "done", res["pool"]["roll"]
    assert 200 not in seen and 401 in seen, [(k, len(list(g))) for k, g in groupby(seen)]
    body = {**BODY, "model": "keyed"}
    assert httpx.post(endpoint + "/v1/completions", json=body, timeout=10).status_code == 401
    r = httpx.post(endpoint + "/v1/completions", json=body, headers=KEY, timeout=10)
    assert r.status_code == 200, r.text


def test_the_endpoint_asks_for_a_key_from_a_key_file_and_one_it_cannot_read(tmp_path):
    from sgltui.agent.endpoint.endpoint import routable
    from sgltui.core.profiles import get_profile

    keyfile = tmp_path / "key"
    keyfile.write_text("from-the-file\n")
    body = '[server]\nmodel-path = "org/m"\nport = 30001\n[key-files]\napi-key = "{}"\n'
    (tmp_path / "f.toml").write_text(f'name = "f"\nlauncher = "sim"\n{body.format(keyfile)}')
    assert routable(get_profile(str(tmp_path / "f.toml"))).api_key == "from-the-file"
    gone = tmp_path / "gone"
    (tmp_path / "g.toml").write_text(f'name = "g"\nlauncher = "sim"\n{body.format(gone)}')
    key = routable(get_profile(str(tmp_path / "g.toml"))).api_key
    assert key and key != "from-the-file"  # asked for, held by nobody: nothing is woken for it
