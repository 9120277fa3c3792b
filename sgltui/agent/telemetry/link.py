"""Telemetry (agent/telemetry.py) wired to the agent: started with it, following the slots'
servers from their events, fed their log lines, and its readings published (capacity cards as
events; samples, with each pool's gateway metrics, to the session and to live viewers).

The samplers watch a server from its launch (or its adoption by this agent, or its attach)
until its slot has none: stopped, failed or crashed. The agent runs on without telemetry when it
cannot start (the context's `telemetry` stays None, and every reader checks).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sgltui import protocol
from sgltui.agent.slot.server_url import connect_host
from sgltui.agent.slot.slot import CRASHED, FAILED, STOPPED

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.pushes import Pushes

log = logging.getLogger("sgltui.agent")


class TelemetryLink:
    def __init__(
        self,
        ctx: AgentContext,
        pools: Pools,
        pushes: Pushes,
    ) -> None:
        self.ctx = ctx  # it sets the context's `telemetry`
        self.pools = pools  # each pool's gateway metrics ride on the samples
        self.pushes = pushes  # the samples' live viewers

    async def start(self) -> None:
        from sgltui.agent.telemetry import Telemetry

        ctx = self.ctx
        try:
            source = ctx.config.gpu_source
            ctx.telemetry = Telemetry(
                on_sample=self._on_sample,
                on_capacity=self._on_capacity,
                on_answer=self._on_answer,
                gpu_source=None if source == "auto" else source,
            )
            await ctx.telemetry.start()
        except Exception:
            log.exception("telemetry failed to start; continuing without it")
            ctx.telemetry = None

    async def stop(self) -> None:
        if self.ctx.telemetry is not None:
            try:
                await self.ctx.telemetry.stop()
            except Exception:
                log.exception("telemetry stop")

    def follows(self, event: protocol.EventBase, record: dict) -> None:
        """A subscriber of the agent's events: attach a server's samplers, or detach them."""
        tele = self.ctx.telemetry
        if tele is None or event.slot is None:
            return
        slot = self.ctx.slots.get(event.slot)
        attached = isinstance(event, protocol.SlotAttached) and event.action == "attached"
        if (
            isinstance(event, protocol.Launch)
            or (isinstance(event, protocol.AgentAdopt) and event.ok)
            or attached
        ):
            if slot is not None and (slot.tree is not None or attached):
                tele.attach(
                    slot.id,
                    slot.tree.pid if slot.tree else 0,  # 0: a remote server, no process here
                    f"http://{connect_host(slot.server_host)}:{slot.port}",
                    slot.api_key,
                    tp_size=slot.tp_size,
                )
        elif isinstance(event, protocol.SlotStateChanged) and event.state in (
            STOPPED,
            FAILED,
            CRASHED,
        ):
            tele.detach(event.slot)

    def line(self, slot_id: str, line: str) -> None:
        """A server's log line (the engine's throughput and queue lines are read from it)."""
        if self.ctx.telemetry is not None:
            try:
                self.ctx.telemetry.on_log_line(slot_id, line)
            except Exception:
                log.exception("telemetry log line")

    def _on_capacity(self, slot_id: str, card: dict) -> None:
        slot = self.ctx.slots.get(slot_id)
        self.ctx.bus.publish(
            protocol.Capacity(
                client=slot.client if slot else None,
                slot=slot_id,
                launch_id=slot.launch_id if slot else None,
                card=card,
            )
        )

    def _on_answer(self, slot_id: str) -> None:
        """Its server answered an engine poll: an answer its liveness check need not ask for."""
        slot = self.ctx.slots.get(slot_id)
        if slot is not None:
            slot.liveness.heard()

    def _on_sample(self, sample: dict) -> None:
        gateways = self.pools.telemetry()
        if gateways:  # each pool's gateway: requests active per worker, retries, errors, breaker
            sample = {**sample, "gateways": gateways}
        try:
            self.ctx.session.sample(sample)
        except Exception:
            log.exception("recording sample")
        # the tick's lines first (subscribe logs="tick"): a client reads both in one wake-up
        self.pushes.log_batch.flush()
        self.pushes.broadcast("sample", sample)
