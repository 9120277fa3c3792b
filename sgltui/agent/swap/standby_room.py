"""Whether one more standby may be added to a slot (blocking reads: a worker thread): both
servers able to sleep (agent/swap/saver_check.py), clients kept across a warm swap (a front), host
RAM for every pinned copy and GPU room beside the sleepers (agent/swap/standby_memory.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sgltui.agent.slot.slot import READY
from sgltui.agent.swap import saver_check
from sgltui.agent.swap import standby_memory as mem

if TYPE_CHECKING:
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.slot.resolved import Resolved
    from sgltui.agent.slot.slot import Slot
    from sgltui.agent.swap.standby import Standbys


def front_off(slot: Slot, pools: Pools) -> str | None:
    """Why a warm swap cannot keep the slot's clients: with the front off they call the
    server's own port, which after the swap is a paused server holding their requests (the
    woken one serves on a port of its own). None: a front, or a pool's gateway."""
    if slot.front is not None or pools.front_port(slot.id) is False:
        return None
    return (
        f'slot {slot.id} has no front ([front] port = "off" in agent.toml): after a warm '
        "swap it would serve on the standby's port while its clients keep calling the old "
        "one, held by a paused server"
    )


# What to do about front_off's refusal, in the CLI's words and the TUI's.
FRONT_OFF_FIX = "set [front] port in agent.toml, or swap cold (`sgltui standby remove PROFILE`)"
FRONT_OFF_FIX_TUI = "set [front] port in agent.toml, or swap cold (no standby kept warm)"


def check(
    standbys: Standbys, slot: Slot, target: Resolved, serving_fraction: float | None = None
) -> str | None:
    """Whether both can sleep; host RAM and GPU room for one more sleeper. `standbys`:
    agent/swap/standby.py's Standbys (what each slot keeps warm); `serving_fraction`: the
    mem_fraction_static the slot's running server reports (/server_info), when it does."""
    found = saver_check.problem(target)
    serving = slot.profile if slot.profile is not None and slot.state == READY else None
    if not found and serving is not None:
        found = saver_check.weight_cache_problem(
            serving.name, serving.server
        ) or saver_check.alloc_conf_problem(serving.name, serving.env)
    if found:
        return f"standby {target.name} refused: {found}"
    return host_room(standbys, slot, target) or gpu_room(standbys, slot, target, serving_fraction)


def host_room(standbys: Standbys, slot: Slot, target: Resolved) -> str | None:
    """Host RAM: the new sleeper's pinned copy and hicache host pool, and the serving
    profile's own first pinned copy (made at its first release, which this add does)."""
    need = mem.pins_estimate(target)
    if need is None:
        return None
    what = {target.name: need}
    pinned = {
        f"{sb.slot_id}/{sb.name}": sb.host_bytes or (mem.pins_estimate(sb.server.profile) or 0)
        for sbs in standbys.by_slot.values()
        for sb in sbs.values()
        if sb.server.profile is not None and sb.server.profile.launcher == target.launcher
    }
    serving = slot.profile if slot.tree is not None else None
    if serving is not None and serving.launcher == target.launcher:
        own = mem.weights_bytes(serving) or 0
        if slot.pinned_once:  # its copy is kept while it serves (TMS_RETAIN_CPU_BACKUP)
            pinned[f"{slot.id}/{slot.profile_name}"] = own
        else:
            what[f"{slot.profile_name}'s first pinned copy"] = own
    available = mem.host_available(target, sum(pinned.values()))
    return mem.refuse_host(target.name, what, available, standbys.reserve, pinned)


def gpu_room(
    standbys: Standbys, slot: Slot, target: Resolved, serving_fraction: float | None
) -> str | None:
    """GPU room: every profile of the slot, serving, keeps SGLang's own reserve beside the
    others asleep (their remainders measured after their release, else estimated)."""
    total = mem.gpu_total(target)

    def member(name: str, profile: Any, remainder: int, measured: bool) -> mem.Member:
        fraction, where = mem.mem_fraction(profile, total)
        reserve = mem.activation_reserve(profile, total)
        return mem.Member(name, fraction, remainder, reserve, where, measured)

    members = [
        member(sb.name, sb.server.profile, sb.gpu_bytes or mem.DEFAULT_REMAINDER, sb.gpu_bytes > 0)
        for sb in standbys.of(slot.id).values()
        if sb.server.profile is not None
    ]
    if slot.profile is not None and slot.state == READY:
        # it sleeps in turn when another is woken
        serving = member(slot.profile_name or "?", slot.profile, mem.DEFAULT_REMAINDER, False)
        if serving_fraction:
            serving.mem_fraction, serving.fraction_from = serving_fraction, "its /server_info"
        members.append(serving)
    members.append(member(target.name, target, mem.DEFAULT_REMAINDER, False))
    return mem.refuse_gpu(target.name, total, members)
