"""agent/slot/liveness.py: a paused server (its /ready 503) whose queue does not go down is not
alive: an agent killed mid-swap once left a slot `ready` on one, and every request hung."""

from __future__ import annotations

import asyncio

from sgltui.agent.slot import liveness as lv


def probe(monkeypatch, queues: list[int]):
    async def fake_get(host, port, path, key=None, timeout=2.0):
        return 503, b""

    async def fake_load(host, port, key=None):
        return queues.pop(0)

    monkeypatch.setattr(lv.http_probe, "get", fake_get)
    monkeypatch.setattr(lv.http_probe, "load", fake_load)
    monkeypatch.setattr(lv, "stopped_by_signal", lambda pid: False)


async def ticks(live: lv.Liveness, n: int) -> None:
    for i in range(n):
        live._next = 0.0
        live.heard(float("-inf"))
        live.tick(1000.0 + i, None, "127.0.0.1", 1, None)
        await asyncio.sleep(0.01)


def test_a_paused_server_whose_queue_grows_is_unresponsive(monkeypatch):
    probe(monkeypatch, [1, 3, 5])
    changes: list[str | None] = []
    live = lv.Liveness("a", changes.append)
    live._answered_at = 0.0  # long ago
    asyncio.run(ticks(live, 3))
    assert live.reason is not None and "paused" in live.reason and "5 requests" in live.reason


def test_a_paused_server_with_nothing_waiting_is_alive(monkeypatch):
    probe(monkeypatch, [0, 0, 0])
    live = lv.Liveness("a", lambda r: None)
    live._answered_at = 0.0
    asyncio.run(ticks(live, 3))
    assert live.reason is None
