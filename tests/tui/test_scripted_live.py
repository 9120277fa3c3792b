"""The scripted source's live mode (bench_tui_idle.py's stand-in agent): a sample and the
tick's log lines every live_interval, the samples given first, and no tick after it closes."""

from __future__ import annotations

import asyncio

from tests.support.scripted import ScriptedSource, make_host_status


async def test_live_ticks_send_the_given_samples_then_stop_when_closed():
    given = {"v": 1, "ts": 1.0, "gpus": [], "host": None, "engine": {}}
    src = ScriptedSource(
        make_host_status(2), live_interval=0.05, logs_per_tick=True, samples=[given]
    )
    pushes = src.pushes()
    src.feed({"push": "log", "data": {"slot": "a", "lines": ["fed"]}})
    got = [await pushes.__anext__() for _ in range(4)]
    assert [p["push"] for p in got] == ["logs", "sample", "logs", "sample"]
    assert got[0]["data"][0]["lines"] == ["fed"]  # held for the tick, before its own line
    assert got[1]["data"] is given and got[3]["data"]["ts"] > 1.0  # then made at each tick
    await pushes.aclose()
    await asyncio.sleep(0.15)
    assert src._queue.empty()  # the tick's timer went with the pushes
