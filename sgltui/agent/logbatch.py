"""Server log lines for the subscribers that take them once per tick (`subscribe logs="tick"`).

Every slot's lines since the last tick go out as one "logs" push (a list of LogLines), sent
just before the sample, so that a TUI reads both in one wake-up and draws them in one frame;
when no sample comes, after LOG_TICK_S at most. Why: 8 idle servers print a line or two a
second each (the gateway's health checks, the readiness probes), and one push per slot per read
was a dozen wake-ups a second of every TUI, a third of its idle CPU. A subscriber of "each"
(the default, and the CLI's) still gets a "log" push per slot at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

LOG_TICK_S = 1.0  # the sampler's tick: the longest a line waits for its push


class LogBatch:
    """The lines waiting for the next tick, per (slot, launch) in the order they came."""

    def __init__(self, send: Callable[[list[dict[str, Any]]], None], tick_s: float = LOG_TICK_S):
        self._send = send
        self.tick_s = tick_s
        self._pending: dict[tuple[str, str], list[str]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def add(self, slot_id: str, launch_id: str, lines: list[str]) -> None:
        if not lines:
            return
        self._pending.setdefault((slot_id, launch_id), []).extend(lines)
        if self._timer is None:  # no sample within a tick (the sampler stopped): sent anyway
            self._timer = asyncio.get_running_loop().call_later(self.tick_s, self.flush)

    def flush(self) -> None:
        """Send what waits, as one push (nothing when nothing waits)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        self._send(
            [
                {"slot": slot, "launch_id": launch, "lines": lines}
                for (slot, launch), lines in pending.items()
            ]
        )

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending = {}
