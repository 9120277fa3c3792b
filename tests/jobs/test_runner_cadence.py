"""The runner's progress cadence: a --choose trial on a simulator faster than real time reads the
job (and flushes the output the readings count) at the server's pace, not every 0.25 s of wall."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time

from aiohttp import web

from sgltui.jobs.runner import MIN_PROGRESS_S, PROGRESS_S, Runner
from tests.jobs.batch_input import read_output, write_input


async def _serve() -> tuple[web.AppRunner, int]:
    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(0.004)  # a steady stream of answers, ~500 a second at 2 in flight
        body = await request.json()
        return web.json_response(
            {
                "id": "x",
                "object": "text_completion",
                "choices": [{"index": 0, "text": "ok", "finish_reason": "length"}],
                "usage": {"prompt_tokens": 4, "completion_tokens": int(body["max_tokens"])},
            }
        )

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()  # the port through public calls (test_retries.py says why)
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    return runner, sock.getsockname()[1]


def test_the_cadence_is_clamped_to_the_floor_and_the_runners_own_pace(tmp_path):
    r = Runner(tmp_path / "in.jsonl", tmp_path / "out.jsonl", 1, [].append)
    assert r.progress_s == PROGRESS_S
    r.set_cadence(0.001)
    assert r.progress_s == MIN_PROGRESS_S
    r.set_cadence(5.0)
    assert r.progress_s == PROGRESS_S
    r.set_cadence(0.05)
    assert r.progress_s == 0.05
    r.set_cadence(None)  # the trial is over: the runner's own pace again
    assert r.progress_s == PROGRESS_S


async def _distinct_done(tmp_path, cadence: float | None, seconds: float = 0.6) -> int:
    """How many different `done` counts the progress readings carried in `seconds` of a steady
    stream of answers."""
    server, port = await _serve()
    tmp_path.mkdir()
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 5000, max_tokens=4)
    events: list[dict] = []
    r = Runner(inp, out, 2, events.append)
    r.prepare()
    r.set_cadence(cadence)
    r.set_target(f"http://127.0.0.1:{port}")
    task = asyncio.get_running_loop().create_task(r.run())
    try:
        await asyncio.sleep(seconds)
    finally:
        r.stop()
        await asyncio.wait_for(task, 10)
        await server.cleanup()
    progress = [e["done"] for e in events if e["t"] == "progress"]
    assert len(read_output(out)) == r.c.done  # what the readings count is on disk
    return len(set(progress))


async def test_a_trial_cadence_reads_the_job_at_its_pace_and_the_default_stays(tmp_path):
    fast = await _distinct_done(tmp_path / "fast", 0.02)
    slow = await _distinct_done(tmp_path / "slow", None)
    # every 20 ms: ~30 readings in 0.6 s, each with new answers flushed (a loaded machine
    # leaves fewer); every 0.25 s: at most 3
    assert fast >= 10, fast
    assert slow <= 3, slow


async def test_the_runner_child_takes_the_cadence_op_and_goes_back_to_its_own_pace(tmp_path):
    """The agent's control line {"op": "cadence", "s": S} to a real runner child: progress lines
    every 20 ms while a trial reads the job, every 0.25 s again after {"s": null}."""
    server, port = await _serve()
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 20000, max_tokens=4)
    spec = {"id": "j", "input": str(inp), "output": str(out), "concurrency": 2}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sgltui.jobs.worker",
        "--spec-json",
        json.dumps(spec),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(msg: dict) -> None:
        stdin.write(json.dumps(msg).encode() + b"\n")

    async def progress_lines(seconds: float) -> int:
        n, end = 0, time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                raw = await asyncio.wait_for(stdout.readline(), left)
            except asyncio.TimeoutError:
                break
            n += json.loads(raw).get("t") == "progress"
        return n

    try:
        send({"op": "target", "url": f"http://127.0.0.1:{port}"})
        send({"op": "cadence", "s": 0.02})
        await progress_lines(0.3)  # the check and the first answers
        fast = await progress_lines(0.6)
        send({"op": "cadence", "s": None})
        await progress_lines(0.3)
        slow = await progress_lines(0.6)
        assert fast >= 10 and slow <= 3, (fast, slow)
    finally:
        send({"op": "stop"})
        stdin.close()
        await asyncio.wait_for(proc.wait(), 10)
        await server.cleanup()
