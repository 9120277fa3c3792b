"""ReplaySource: a recorded session as a read-only TuiSource, with a movable time cursor.

Moving forward by a little (playing, stepping) sends the pushes recorded in between, exactly
as the agent sent them live, so every pane updates the way it did then. Moving backwards, or far
forward, cannot be expressed as pushes (panes keep history), so the source asks its viewer to
rebuild (`on_reset`) from STATUS at the new time plus a window of recent history.

No Textual here: the app drives the cursor from key bindings; tests can drive it directly.
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from sgltui.session.replay import CHART_WINDOW_S, Replay

# A forward move longer than this (session seconds) rebuilds instead of replaying every push.
MAX_INCREMENTAL_S = CHART_WINDOW_S
PLAY_TICK_S = 0.1  # wall-clock seconds between playback steps
SPEEDS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
NOTABLE = (
    "launch",
    "slot.state",
    "swap.done",
    "bench.start",
    "bench.done",
    "disk.error",
    "agent.start",
    "agent.stop",
)

_RESET = object()

log = logging.getLogger(__name__)


def _read_only_error(op: str) -> Exception:
    from sgltui.client.errors import Refused

    return Refused(f"read-only replay: {op} is not available")


class ReplaySource:
    read_only = True
    read_only_label = "REPLAY · read-only"

    def __init__(self, replay: Replay, at: float | None = None, speed: float = 10.0) -> None:
        self.replay = replay
        self.client_name = "replay"
        self.t = replay.clamp(replay.start + at if at is not None else replay.start)
        self.speed = float(speed)
        self.playing = False
        self.listeners: list[Callable[[ReplaySource], Any]] = []
        self.on_reset: Callable[[float], Awaitable[None] | None] | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._play_task: asyncio.Task | None = None
        self._notable = replay.event_times(NOTABLE)

    @classmethod
    def open(cls, path: Path, at: float | None = None, speed: float = 10.0) -> ReplaySource:
        return cls(Replay.open(path), at=at, speed=speed)

    # -- TuiSource ---------------------------------------------------------------------------
    async def connect(self) -> None:
        if self._queue is None:
            self._queue = asyncio.Queue()

    async def snapshot(self) -> dict:
        return self.replay.status_at(self.t)

    async def pushes(self) -> AsyncIterator[dict]:
        await self.connect()
        assert self._queue is not None
        while True:
            item = await self._queue.get()
            if item is _RESET:
                # Drop what was queued for the old position; the viewer rebuilds from scratch.
                while not self._queue.empty():
                    self._queue.get_nowait()
                if self.on_reset is not None:
                    result = self.on_reset(self.t)
                    if inspect.isawaitable(result):
                        await result
                continue
            yield item

    async def call(self, op: str, **args: Any) -> Any:
        t = self.t
        if op in ("status",):
            return self.replay.status_at(t)
        if op == "ping":
            return {"pong": True, "replay": True}
        if op == "logs":
            # None named: the session's first slot, as the agent takes its only one.
            slots = self.replay.status_at(t)["slots"]
            slot = str(args.get("slot") or (slots[0]["id"] if slots else ""))
            return {
                "lines": self.replay.log_tail(
                    slot, t, int(args.get("lines") or 200), args.get("launch_id")
                ),
                # The lines come from the session's copy of the log, not a live file; no
                # launch named: the first log push names the one its lines come from.
                "path": "",
                "launch_id": "",
            }
        if op == "bench_list":
            # The agent's BenchRun always has a start time; a run recorded without its
            # bench.start event gets the session's start.
            return [
                {**run, "started": run.get("started") or self.start}
                for run in self.replay.bench_runs_at(t)
            ]
        if op == "profiles":
            return self.replay.status_at(t)["profiles"]
        if op == "timeline":
            since = args.get("since")
            lo = float(since) if isinstance(since, (int, float)) else t - CHART_WINDOW_S
            series: dict[str, list] = {}
            for s in self.replay.samples_between(lo, t):
                for slot, eng in (s.get("engine") or {}).items():
                    for k, v in (eng or {}).items():
                        if isinstance(v, (int, float)) and not isinstance(v, bool):
                            series.setdefault(f"{slot}.{k}", []).append([s["ts"], v])
            names = args.get("series")
            if names:
                series = {k: v for k, v in series.items() if k in set(names)}
            return {"series": series}
        raise _read_only_error(op)

    async def close(self) -> None:
        self.pause()

    # -- the cursor ---------------------------------------------------------------------------
    @property
    def start(self) -> float:
        return self.replay.start

    @property
    def end(self) -> float:
        return self.replay.end

    @property
    def offset(self) -> float:
        return self.t - self.replay.start

    def seek(self, t: float) -> None:
        """Move the cursor to t (clamped to the session)."""
        t = self.replay.clamp(t)
        if t == self.t:
            self._moved()
            return
        if self._queue is None:
            self._queue = asyncio.Queue()
        if self.t < t <= self.t + MAX_INCREMENTAL_S:
            for push in self.replay.pushes_between(self.t, t):
                self._queue.put_nowait(push)
        else:
            self._queue.put_nowait(_RESET)
        self.t = t
        self._moved()

    def step(self, seconds: float) -> None:
        self.seek(self.t + seconds)

    def next_event(self) -> bool:
        i = bisect.bisect_right(self._notable, self.t)
        if i >= len(self._notable):
            return False
        self.seek(self._notable[i])
        return True

    def prev_event(self) -> bool:
        i = bisect.bisect_left(self._notable, self.t)
        if i == 0:
            return False
        self.seek(self._notable[i - 1])
        return True

    def set_speed(self, speed: float) -> None:
        self.speed = max(0.01, float(speed))
        self._moved()

    def faster(self) -> None:
        self.set_speed(next((s for s in SPEEDS if s > self.speed), SPEEDS[-1]))

    def slower(self) -> None:
        self.set_speed(next((s for s in reversed(SPEEDS) if s < self.speed), SPEEDS[0]))

    def play(self) -> None:
        if self.playing:
            return
        if self.t >= self.end:
            self.seek(self.start)  # play at the end starts over, like a media player
        self.playing = True
        self._play_task = asyncio.get_running_loop().create_task(
            self._play_loop(), name="replay-play"
        )
        self._moved()

    def pause(self) -> None:
        self.playing = False
        task, self._play_task = self._play_task, None
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
        self._moved()

    def toggle(self) -> None:
        self.pause() if self.playing else self.play()

    async def _play_loop(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        try:
            while self.playing:
                await asyncio.sleep(PLAY_TICK_S)
                now = loop.time()
                # Advance by the wall time that really passed, so a busy event loop slows the
                # frame rate but not the playback speed.
                self.seek(self.t + (now - last) * self.speed)
                last = now
                if self.t >= self.end:
                    self.playing = False
                    self._moved()
        except asyncio.CancelledError:
            pass

    def _moved(self) -> None:
        for listener in list(self.listeners):
            try:
                listener(self)
            except Exception:  # a broken viewer must not stop playback
                log.exception("replay listener failed")
