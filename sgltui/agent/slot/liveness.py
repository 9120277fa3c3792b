"""Is a ready server still answering? A slot's liveness while it is ready.

A server stopped with SIGSTOP (or wedged: a deadlock, a GPU hang) keeps its process and its
port, so nothing exits and the slot stayed `ready`: a job called it stalled after a minute and
nothing else said a word (issue 35). While a slot is ready, every CHECK_S seconds this looks at
its main process (state T: stopped by a signal) and asks /ready with a short timeout; once
nothing has answered for UNRESPONSIVE_AFTER_S seconds, the slot is unresponsive, with the
reason, until it answers again. The check runs in its own task: a probe that waits for its
timeout never delays the slot's watcher (exits, log lines).

Telemetry polls the same server (/metrics every 1 s, an idle one every 3 s): an answer it got
within HEARD_S is an answer (`heard`), and no probe is sent. With 8 slots the probes were half
the agent's HTTP requests at idle (issue 39).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import psutil

from sgltui.agent.slot import http_probe
from sgltui.core.tasks import spawn

CHECK_S = 2.0
PROBE_TIMEOUT_S = 3.0
UNRESPONSIVE_AFTER_S = 6.0  # no answer this long: said (well within the 15 s asked for)
# The engine poll's answers count this long: an idle server is polled every 3 s on a 1 s tick
# (up to 4 s apart), and a tick of slack. A server that stops answering is probed HEARD_S after
# its last answer, every CHECK_S, and said to be unresponsive UNRESPONSIVE_AFTER_S after it.
HEARD_S = 5.0


def stopped_by_signal(pid: int) -> bool:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    return False


class Liveness:
    """One ready server's answers; `reason` is None while it answers."""

    def __init__(self, slot_id: str, on_change: Callable[[str | None], None]) -> None:
        self.slot_id = slot_id
        self.on_change = on_change
        self.reason: str | None = None
        self._answered_at = time.monotonic()
        self._heard_at = float("-inf")  # the last answer telemetry's engine poll got
        self._next = 0.0
        self._task: asyncio.Task[None] | None = None
        # /ready said 503 (paused): how many requests wait in it; None when it was not paused
        self._queued: int | None = None

    def reset(self) -> None:
        """Not ready (launching, stopping, gone): nothing to say about its answers."""
        self._answered_at = time.monotonic()
        self._heard_at = float("-inf")
        self._next = 0.0
        self._queued = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None
        self._set(None)

    def heard(self, at: float | None = None) -> None:
        """The server answered another request of the agent's (telemetry's engine poll) at
        `at` (monotonic; now by default): it is alive, and the next probe can wait."""
        self._heard_at = time.monotonic() if at is None else at

    def tick(self, now: float, pid: int | None, host: str, port: int, key: str | None) -> None:
        """Called by the slot's watcher while the slot is ready: a check when one is due."""
        # it answered telemetry lately: alive, no probe (unless it was paused: /metrics
        # answers then, and says nothing of the requests waiting in it)
        if now - self._heard_at < HEARD_S and self._queued is None:
            self._answered_at = max(self._answered_at, self._heard_at)
            self._set(None)
            return
        if now < self._next or (self._task is not None and not self._task.done()):
            return
        self._next = now + CHECK_S
        self._task = spawn(self._check(pid, host, port, key), f"slot {self.slot_id}: liveness")

    async def _check(self, pid: int | None, host: str, port: int, key: str | None) -> None:
        if pid is not None and stopped_by_signal(pid):
            # no probe can be answered; say why at once, with what resumes it
            self._set(f"its process {pid} is stopped (SIGSTOP); `kill -CONT {pid}` resumes it")
            return
        status, _ = await http_probe.get(host, port, "/ready", key, timeout=PROBE_TIMEOUT_S)
        now = time.monotonic()
        if status == 503:
            # Paused (/pause_generation), or not ready: a paused server whose queue grows takes
            # requests and runs none (an agent killed mid-swap left it so); not an answer.
            queued = await http_probe.load(host, port, key)
            before, self._queued = self._queued, queued or 0
            if (queued or 0) > 0 and (before is None or (queued or 0) >= before):
                if now - self._answered_at >= UNRESPONSIVE_AFTER_S:
                    self._set(
                        f"it is paused and {queued} requests wait in it, none runs; "
                        "`sgltui restart` relaunches it"
                    )
                return
        else:
            self._queued = None
        if status:  # any answer: alive (a 404 on an older server still answers)
            self._answered_at = now
            self._set(None)
        elif now - self._answered_at >= UNRESPONSIVE_AFTER_S:
            self._set(f"no answer for {now - self._answered_at:.0f} s")

    def _set(self, reason: str | None) -> None:
        if (reason is None) != (self.reason is None):
            self.reason = reason
            self.on_change(reason)
        else:
            self.reason = reason
