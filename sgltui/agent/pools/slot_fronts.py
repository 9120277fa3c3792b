"""Each slot's front endpoint (agent/pools/front.py), made when the agent starts and kept pointed at
what the slot runs: a ready server gets the requests; while a swap or a launch is on they are
held (bounded); otherwise they get 503 at once, saying why and what to do.

A front binds on [front] port + the slot's index; a pool of one binds its front on the pool's
port (the pool's endpoint); a slot of a pool of two or more has none (the pool's gateway is its
endpoint: agent/pools/pools.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from sgltui import protocol
from sgltui.agent.jobs.batch_api import BatchApi, BatchStore
from sgltui.agent.pools.front import Front, Keys
from sgltui.agent.slot.slot import CRASHED, FAILED, LAUNCHING, READY, STOPPED

if TYPE_CHECKING:
    from sgltui.agent.agent_calls import AgentCalls
    from sgltui.agent.context import AgentContext
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.slot.slot import Slot


class Fronts:
    def __init__(self, ctx: AgentContext, pools: Pools, calls: AgentCalls) -> None:
        self.ctx = ctx
        self.pools = pools  # where each slot's front binds
        self.calls = calls  # the Batch API's jobs are the agent's ops (job_run, job_status...)

    async def start(self) -> None:
        """One front endpoint per slot, on FrontConfig.port + the slot's index."""
        from sgltui.agent import config as agent_config
        from sgltui.core import placement

        cfg = self.ctx.config.front
        if cfg.port is None:
            return
        # the OpenAI Batch API on each front, its batches the slot's jobs (agent/jobs/batch_api.py)
        store = BatchStore(self.ctx.state_dir / "batch-api")
        for i, slot in enumerate(self.ctx.slots.values()):
            host, port = cfg.host, cfg.port + i
            setting = f"[front] port in {agent_config.default_path()}" + (f" (+{i})" if i else "")
            where = self.pools.front_port(slot.id)
            if where is False:
                continue  # a slot of a pool of two or more: the pool's gateway is its endpoint
            if isinstance(where, tuple):
                host, port = where  # a pool of one: the front is the pool's endpoint
                setting = f"the pool's port in {placement.default_path()}"
            batches = BatchApi(store, self.calls, slot=slot.id)
            front = Front(
                slot.id,
                host,
                port,
                cfg,
                on_event=self._event,
                setting=setting,
                routes=batches.routes(),
            )
            await front.start()  # a port already taken leaves front.error for status to show
            slot.attach_front(front)

    def _event(self, event: protocol.EventBase) -> None:
        s = self.ctx.slots.get(event.slot or "")
        self.ctx.bus.publish(msgspec.structs.replace(event, client=s.client if s else None))

    def follow(self) -> None:
        """A slot changed: its front follows at once (hold, route, release)."""
        for slot in self.ctx.slots.values():
            sync(slot)


def sync(slot: Slot) -> None:
    """Point the slot's front at what the slot runs."""
    front = slot.front
    if front is None or front.error:
        return
    swapping = slot.swap is not None and slot.swap.step != "failed"
    if slot.state == READY and not (swapping and slot.launch_id == front.held_from):
        front.route_to(slot.server_host, slot.port, keys(slot))
    elif swapping or slot.state == LAUNCHING:
        front.hold(
            f"slot {slot.id}: " + ("swap" if swapping else "launch") + " in progress",
            held_from=slot.launch_id,
        )
    else:
        cause = (slot.cause or {}).get("summary")
        if slot.state in (STOPPED, FAILED, CRASHED):
            what = f"no server runs on this slot ({slot.state}" + (f": {cause})" if cause else ")")
        else:
            what = f"its server is {slot.state} and takes no new requests"
        front.release(what + "; start one with `sgltui start PROFILE`")


def keys(slot: Slot) -> Keys:
    """The keys of the profile `slot` serves (its [key-files] read at launch)."""
    server = getattr(slot.profile, "server", None) or {}
    admin = server.get("admin-api-key")
    return Keys(
        slot.api_key,
        str(admin)
        if isinstance(admin, (str, int)) and not isinstance(admin, bool) and admin
        else None,
    )
