"""The runner's retries against a server that misbehaves on purpose: 5xx, SGLang aborts and
dropped connections are retried; 4xx are final; connection refused waits and is never counted."""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter

from aiohttp import web

from sgltui.jobs.runner import Runner
from sgltui.jobs.verify import verify
from tests.jobs.batch_input import read_output, write_input


def _answer(cid: str, reason: str = "length") -> dict:
    return {
        "id": f"cmpl-{cid}",
        "object": "text_completion",
        "choices": [{"index": 0, "text": "ok", "finish_reason": reason}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5},
    }


async def _serve(handler) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    # A socket bound here gives the port through public calls (aiohttp's TCPSite keeps its
    # listening socket in a private attribute).
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    return runner, sock.getsockname()[1]


async def test_transient_errors_are_retried_and_4xx_are_final(tmp_path):
    attempts: Counter[str] = Counter()

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        key = json.dumps(body, sort_keys=True)
        attempts[key] += 1
        n = attempts[key]
        if "messages" not in body and "prompt" not in body:
            return web.json_response({"error": "bad request"}, status=400)
        if n == 1:
            return web.json_response({"error": "overloaded"}, status=503)
        if n == 2:
            return web.json_response(_answer("x", reason="abort"))  # SGLang abort / retract
        if n == 3:
            request.transport.close()  # the connection drops mid-request
            return web.Response()
        return web.json_response(_answer("x"))

    server, port = await _serve(handler)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 20, bad=(4,))
    events: list[dict] = []
    import sgltui.jobs.runner as R

    R.BACKOFF_S = 0.01  # the policy, not the waiting, is under test
    r = Runner(inp, out, 4, events.append)
    r.prepare()
    r.set_target(f"http://127.0.0.1:{port}")
    try:
        assert await asyncio.wait_for(r.run(), 60) == "done"
    finally:
        await server.cleanup()
        R.BACKOFF_S = 0.5
    assert r.c.done == 19 and r.c.failed == 1
    assert r.c.retries == 19 * 2  # the 503 and the abort
    assert r.c.conn_errors == 19  # the dropped connection: retried, never counted against it
    errors = read_output(tmp_path / "out.errors.jsonl")
    assert [e["custom_id"] for e in errors] == ["req-000004"]
    assert errors[0]["response"]["status_code"] == 400
    v = verify(inp, out)
    assert v.answered == 19 and v.n_failed == 1 and v.n_missing == 0 and v.n_duplicates == 0


async def test_connection_refused_waits_for_the_server_and_is_not_a_failure(tmp_path, free_port):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 10)
    r = Runner(inp, out, 2, lambda m: None)
    r.prepare()
    r.set_target(f"http://127.0.0.1:{free_port}")  # nothing listens yet
    task = asyncio.get_running_loop().create_task(r.run())
    deadline = asyncio.get_running_loop().time() + 20
    while r.c.conn_errors < 6:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)

    async def ok(request: web.Request) -> web.Response:
        return web.json_response(_answer("x"))

    app = web.Application()
    app.router.add_post("/v1/completions", ok)
    app.router.add_post("/v1/chat/completions", ok)
    server = web.AppRunner(app)
    await server.setup()
    await web.TCPSite(server, "127.0.0.1", free_port).start()
    try:
        assert await asyncio.wait_for(task, 30) == "done"
    finally:
        await server.cleanup()
    assert r.c.done == 10 and r.c.failed == 0 and r.c.retries == 0
    assert verify(inp, out).ok


async def test_a_gateway_with_no_worker_yet_is_retried_not_a_failure(tmp_path):
    """smg answers 404 model_not_found 'No worker available for model' while its workers are
    (re-)registering (a restart after kill -9, a pool between workers): a routing state that
    ends by itself, not a wrong request. Before, those requests were final: a pool job ended
    'done' with 73 of 1,500 custom_ids in the errors file."""
    attempts: Counter[str] = Counter()
    smg_404 = {
        "error": {
            "type": "invalid_request_error",
            "code": "model_not_found",
            "message": "No worker available for model 'default'",
            "param": None,
        }
    }

    async def handler(request: web.Request) -> web.StreamResponse:
        key = json.dumps(await request.json(), sort_keys=True)
        attempts[key] += 1
        if attempts[key] <= 2:
            return web.json_response(smg_404, status=404)
        return web.json_response(_answer("x"))

    server, port = await _serve(handler)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 10)
    import sgltui.jobs.runner as R

    R.BACKOFF_S = 0.01
    r = Runner(inp, out, 4, [].append)
    r.prepare()
    r.set_target(f"http://127.0.0.1:{port}")
    try:
        assert await asyncio.wait_for(r.run(), 60) == "done"
    finally:
        await server.cleanup()
        R.BACKOFF_S = 0.5
    assert r.c.done == 10 and r.c.failed == 0, (r.c.done, r.c.failed)
    v = verify(inp, out)
    assert v.answered == 10 and v.n_failed == 0 and v.n_missing == 0


async def test_paused_reports_only_once_the_last_answer_is_counted(tmp_path):
    # The server holds every request until released; the job is paused with 3 in flight, then
    # they are answered. "paused" must carry the count that stays: it was reported as the last
    # answer left the flight, before it was written, and answered moved by one after it.
    release = asyncio.Event()
    arrived = 0

    async def handler(request: web.Request) -> web.Response:
        nonlocal arrived
        arrived += 1
        await release.wait()
        return web.json_response(_answer("x"))

    server, port = await _serve(handler)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 10)
    events: list[dict] = []
    r = Runner(inp, out, 3, events.append)
    r.prepare()
    r.set_target(f"http://127.0.0.1:{port}")
    task = asyncio.get_running_loop().create_task(r.run())

    async def pause_then_answer() -> None:
        while arrived < 3:
            await asyncio.sleep(0.01)
        r.pause()
        assert not [e for e in events if e["t"] == "paused"]  # 3 still in flight
        release.set()
        while not [e for e in events if e["t"] == "paused"]:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # a few flush ticks

    try:
        await asyncio.wait_for(pause_then_answer(), 20)
        paused = next(e for e in events if e["t"] == "paused")
        assert paused["done"] == 3 and paused["in_flight"] == 0
        assert r.c.done == 3  # nothing counted after "paused"
        assert len(read_output(out)) == 3  # and it is on disk
    finally:
        r.stop()
        await asyncio.wait_for(task, 10)
        await server.cleanup()
