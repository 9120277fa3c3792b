"""What the agent endpoint (agent/endpoint/endpoint.py) decided, carried out: a wake, a start, an
eviction (kept asleep when it can be, else stopped) or an idle profile put away, each as the
agent's own ops sent by client `endpoint` (their events, locks and refusals are a user's
command's), each said in an `endpoint` event with its cause.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sgltui import protocol
from sgltui.agent.endpoint.policy import Action
from sgltui.agent.errors import OpError
from sgltui.agent.slot.lifecycle import READY

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable

    from sgltui.agent.agent_calls import AgentCalls
    from sgltui.agent.events import EventBus

log = logging.getLogger("sgltui.agent.endpoint")

CLIENT = "endpoint"  # the client name of the ops the endpoint sends (the session shows it)


class Moves:
    """The agent endpoint's part that acts (agent/endpoint/endpoint.py's Endpoint holds one), and what
    it is doing: the endpoint decides from it."""

    def __init__(self, bus: EventBus, calls: AgentCalls, changed: Callable[[], None]) -> None:
        self.bus = bus  # each move is said in an `endpoint` event
        self.calls = calls  # the agent's ops, sent as a client would
        self.changed = changed  # a move ended: the endpoint looks again (Endpoint.changed)
        self.closing: dict[str, str] = {}  # slot -> the profile the endpoint is moving it to
        self.tasks: dict[str, asyncio.Task] = {}  # profile -> its wake, start or eviction
        self.failed: dict[str, tuple[float, str]] = {}  # profile -> (when, why) it did not come
        self.asker: dict[str, str] = {}  # profile -> who asked for it last (the cause)
        self.last_eviction: dict[str, Any] | None = None
        self.swaps = 0

    def say(
        self, action: str, profile: str, text: str, level_slot: str | None = None, **kw: Any
    ) -> None:
        self.bus.publish(
            protocol.EndpointEvent(
                client=CLIENT, slot=level_slot, action=action, profile=profile, text=text, **kw
            )
        )

    async def carry_out(self, act: Action, name: str) -> None:
        slot = str(act.slot)
        cause = f"a request for {name} from {self.asker.get(name, '?')}"
        # counted as it begins: its requests are served once the swap's last step ends, before
        # the op's tail (the state saved) returns here
        self.swaps += 1
        try:
            if act.kind == "wake":
                away = f"; {act.victim} asleep" if act.victim else ""
                self.say("wake", name, f"{name} woken on slot {slot} by {cause}{away}", slot)
                await self._op(
                    self.calls.swap(protocol.SwapArgs(slot=slot, profile=name, wait=True), CLIENT)
                )
            elif act.kind == "start":
                self.say("start", name, f"{name} started on slot {slot} (free) by {cause}", slot)
                await self._op(
                    self.calls.start_slot(
                        protocol.StartArgs(slot=slot, profile=name, wait=True), CLIENT
                    )
                )
            else:
                # checked before anything is put to sleep or stopped for it
                pre = await self.calls.preflight(
                    protocol.PreflightArgs(slot=slot, profile=name), CLIENT
                )
                if not pre.ok:
                    raise OpError(pre.error or "its preflight failed")
                await self._evict(slot, str(act.victim), name, cause, act.reason)
            self.failed.pop(name, None)
        except OpError as exc:
            self.failed[name] = (time.monotonic(), str(exc))
            self.say("failed", name, f"{name} for {cause} did not come up: {exc}", slot)
        finally:
            self.closing.pop(slot, None)
            self.tasks.pop(name, None)
            self.changed()

    async def _evict(self, slot: str, victim: str, name: str, cause: str, why: str) -> None:
        """`victim` gives slot `slot` up to `name`: kept asleep there when it can be (a standby
        of `name` added, then a warm swap), else stopped (a cold swap)."""
        self.last_eviction = {
            "slot": slot,
            "profile": victim,
            "for": name,
            "why": f"{why}; {cause}",
            "at": time.time(),
            "to": "asleep",
        }
        try:
            await self._op(
                self.calls.standby_add(
                    protocol.StandbyArgs(slot=slot, profile=name, wait=True), CLIENT
                )
            )
        except OpError as exc:
            self.last_eviction["to"] = "stopped"
            self.last_eviction["why"] += f" (cannot sleep: {exc})"
        text = f"{victim} evicted from slot {slot} ({self.last_eviction['to']}) for {name}: {why}; {cause}"
        self.say("evict", name, text, slot, victim=victim)
        await self._op(
            self.calls.swap(protocol.SwapArgs(slot=slot, profile=name, wait=True), CLIENT)
        )

    async def put_away(self, slot: str, name: str, idle_s: float | None) -> None:
        try:
            self.say(
                "idle", name, f"{name} stopped on slot {slot}: no request for {idle_s:g}s", slot
            )
            self.swaps += 1
            await self._op(self.calls.stop(protocol.StopArgs(slot=slot, wait=True), CLIENT))
        except OpError as exc:
            log.warning("endpoint: %s idle on slot %s, not stopped: %s", name, slot, exc)
        finally:
            self.closing.pop(slot, None)
            self.tasks.pop(name, None)
            self.changed()

    async def _op(self, sent: Awaitable[protocol.Accepted]) -> None:
        """An op as a user's command would send it (its own events, locks and refusals); an
        outcome that is not a ready server is an OpError with its cause."""
        reply = await sent
        result = getattr(reply, "result", None)
        if result is None:
            return
        if result.error:
            raise OpError(result.error)
        if result.ok is False or (
            result.state is not None and result.state not in (READY, "stopped")
        ):
            why = result.cause.summary if result.cause else f"it ended {result.state}"
            raise OpError(why)
