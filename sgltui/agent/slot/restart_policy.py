"""A crashed server is launched again, per slot, on failure and with back-off.

A job of days must not stop for good because its server died once (a CUDA error, an OOM kill,
a segfault). When a slot goes `crashed` (its server exited by itself, not by a command), this
relaunches exactly what ran (the slot's resolved profile, through the operations' restart path:
the slot's lock, its jobs held and let go on the new server) after BACKOFF_S[n] seconds. The third
crash within WINDOW_S gives up: the slot stays crashed with its cause, and the event, agent.log
and the slot's status say that the policy gave up and why.

The policy (`restart` in agent.toml, SGLTUI_RESTART), for every slot, each counted on its own:
  "job"         (default) only while a batch job uses the slot: a crash nobody depends on is
                left for the person watching to read
  "on-failure"  always
  "never"       leave every crash as it is

It reacts to the slot's own events (`on_event`, called by the supervisor for each one) and acts
through Swaps.relaunch (agent/swap/coordinator.py): it holds no slot state of its own beyond the crash times.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.core.tasks import spawn

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext
    from sgltui.agent.jobs.jobs_host import JobsHost
    from sgltui.agent.swap.coordinator import Swaps

log = logging.getLogger("sgltui.agent.restart")

POLICIES = ("job", "on-failure", "never")
MAX_CRASHES = 3  # the third crash within WINDOW_S gives up
WINDOW_S = 600.0
BACKOFF_S = (1.0, 5.0)  # before the relaunch after the first, the second crash of a window
CLIENT = "agent:restart"


class RestartPolicy:
    def __init__(
        self, ctx: AgentContext, swaps: Swaps, batch: JobsHost, policy: str = "job"
    ) -> None:
        self.ctx = ctx
        self.swaps = swaps  # relaunches a crashed slot
        self.batch = batch  # whether a job still wants the slot
        self.policy = policy
        self.crashes: dict[str, deque[float]] = {}
        self.notes: dict[str, str] = {}  # slot -> what the policy did last, for status
        self._tasks: dict[str, asyncio.Task] = {}

    def note(self, slot_id: str) -> str | None:
        return self.notes.get(slot_id)

    def on_event(self, event: protocol.EventBase, record: dict[str, Any]) -> None:
        """A subscriber of the agent's events (agent/events.py): a slot's crash is its cue."""
        if not isinstance(event, protocol.SlotStateChanged) or event.slot is None:
            return
        slot_id = event.slot
        if event.state == "ready" and event.client != CLIENT:
            self.notes.pop(slot_id, None)  # a person started it: the old story is over
        if event.state != "crashed" or not self._wanted(slot_id):
            return
        now = time.monotonic()
        crashes = self.crashes.setdefault(slot_id, deque())
        while crashes and now - crashes[0] > WINDOW_S:
            crashes.popleft()
        crashes.append(now)
        n = len(crashes)
        summary = (event.cause.summary if event.cause else "") or "it exited"
        if n >= MAX_CRASHES:
            self.notes[slot_id] = (
                f"gave up restarting: {n} crashes in {WINDOW_S / 60:.0f} minutes "
                f"(last: {summary}); `sgltui restart` tries again"
            )
            log.error("slot %s: %s", slot_id, self.notes[slot_id])
            self.ctx.bus.publish(
                protocol.SlotRestart(
                    client=CLIENT, slot=slot_id, crash=n, gave_up=True, reason=self.notes[slot_id]
                )
            )
            crashes.clear()  # a person's restart starts a new count
            return
        delay = BACKOFF_S[min(n - 1, len(BACKOFF_S) - 1)]
        self.notes[slot_id] = (
            f"crashed ({summary}); relaunched by the restart policy "
            f"(crash {n}; crash {MAX_CRASHES} within {WINDOW_S / 60:.0f} minutes gives up)"
        )
        log.warning(
            "slot %s crashed (%s): relaunching in %.0fs (crash %d)", slot_id, summary, delay, n
        )
        self.ctx.bus.publish(
            protocol.SlotRestart(
                client=CLIENT,
                slot=slot_id,
                crash=n,
                in_s=delay,
                gave_up=False,
                reason=f"{summary}; relaunching its profile in {delay:.0f}s",
            )
        )
        old = self._tasks.get(slot_id)
        if old is not None and not old.done():
            old.cancel()
        self._tasks[slot_id] = spawn(self._relaunch(slot_id, delay), f"restart-{slot_id}")

    def _wanted(self, slot_id: str) -> bool:
        if self.policy == "never":
            return False
        if self.policy == "on-failure":
            return True
        return self.batch.active_on(slot_id)

    async def _relaunch(self, slot_id: str, delay: float) -> None:
        await asyncio.sleep(delay)
        slot = self.ctx.slots.get(slot_id)
        if slot is None or slot.state != "crashed" or slot.profile is None:
            return  # a person acted meanwhile (start, swap, stop): theirs wins
        try:
            await self.swaps.relaunch(slot, CLIENT)
        except OpError as exc:  # refused (a busy slot): said, never raised into the loop
            log.warning("slot %s: relaunch refused: %s", slot_id, exc)
            self.notes[slot_id] = f"relaunch refused: {exc}"

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
