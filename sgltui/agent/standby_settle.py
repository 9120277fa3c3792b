"""After re-adoption: a swap an earlier agent was killed in the middle of is undone.

agent-state.json keeps each server's memory-saver steps (paused, released: agent/sleeper.py
writes them before each call) and the swap in progress. A new agent re-adopts the slot's
server and the standbys as they were, then undoes what the swap did: every standby left awake
goes back to sleep first (its GPU memory back before another server maps its own again), then
each slot's server is resumed and continued, only as far as it was released and paused (a
resume of a server not released ends it). The slot serves the profile it served before the swap.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sgltui.agent import sleeper
from sgltui.agent.sleeper import WakeError

if TYPE_CHECKING:
    from sgltui.agent.slot import Slot
    from sgltui.agent.standby import Standbys

log = logging.getLogger("sgltui.agent.standby")


async def settle(standbys: Standbys, slots: dict[str, Slot]) -> None:
    for sbs in standbys.by_slot.values():
        for sb in list(sbs.values()):
            srv = sb.server
            if srv.tree is None or (srv.paused and srv.released):
                continue
            log.warning("standby %s was left awake by a swap: put back to sleep", sb.key)
            try:
                # Its resume may still be in flight (the release is queued behind it): what
                # it kept asleep before tells the release happened.
                await sleeper.pause(srv)
                await sleeper.release(srv, asleep_bytes=sb.gpu_bytes)
            except WakeError:
                log.exception("standby %s did not go back to sleep: stopped", sb.key)
                sbs.pop(sb.name, None)
                await srv.stop("agent", drain="force")
                await srv.close()
    for slot in slots.values():
        if slot.tree is None or not (slot.paused or slot.released):
            continue
        log.warning(
            "slot %s: %s was left %s by a swap: woken",
            slot.id,
            slot.profile_name,
            "released" if slot.released else "paused",
        )
        try:
            await sleeper.wake(slot)
        except WakeError:
            log.exception("slot %s: its server did not wake", slot.id)
