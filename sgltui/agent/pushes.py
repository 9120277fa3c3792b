"""What the agent pushes to its live viewers: each subscriber's queue (a client's connection,
agent/server.py; the metrics endpoint, agent/telemetry/metrics.py), and the fan-out of events, samples
and server log lines to them. A client that stops reading is dropped, never buffered without
bound.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sgltui.agent.logbatch import LogBatch
from sgltui.core.redact import Redactor


class PushQueue(asyncio.Queue):
    """A subscriber's pushes; `overflowed` once the client stopped reading (then dropped)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize=maxsize)
        self.overflowed = False
        self.logs_per_tick = False  # subscribe logs="tick": one "logs" push per tick (logbatch)


class Pushes:
    """The agent's subscribers, and what each is sent."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor  # a server's log lines lose their secrets before they go
        self.subscribers: set[PushQueue] = set()
        # the lines of subscribers that take them once per tick (agent/logbatch.py)
        self.log_batch = LogBatch(lambda batch: self.broadcast("logs", batch, logs_per_tick=True))

    def broadcast(self, kind: str, data: Any, logs_per_tick: bool | None = None) -> None:
        """To every subscriber, or (`logs_per_tick` given) those that take log lines so."""
        msg = {"push": kind, "data": data}
        for q in list(self.subscribers):
            if logs_per_tick is not None and q.logs_per_tick != logs_per_tick:
                continue
            try:
                q.put_nowait(msg)
            except asyncio.QueueFull:
                # A client that stopped reading is dropped rather than buffered without bound.
                self.subscribers.discard(q)
                q.overflowed = True  # the connection closes itself once it drained the rest

    def log_lines(self, slot_id: str, launch_id: str, lines: list[str]) -> None:
        """A server's new log lines, redacted: one push now, or batched for the next tick."""
        if not self.subscribers:
            return
        lines = [self.redactor.text(ln) for ln in lines]
        if any(q.logs_per_tick for q in self.subscribers):
            self.log_batch.add(slot_id, launch_id, lines)
        if not all(q.logs_per_tick for q in self.subscribers):
            self.broadcast(
                "log",
                {"slot": slot_id, "launch_id": launch_id, "lines": lines},
                logs_per_tick=False,
            )
