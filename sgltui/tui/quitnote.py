"""What the user is told on quitting the TUI: which servers keep running and how to stop them
(the agent and its servers outlive the TUI on purpose).

The line names what runs now (a model that lost its agent says it does not know, rather than
name servers that may be gone), the profiles kept warm and a pool's gateway too (they hold
host RAM and a port), and a stop command that works for the slots there are (`sgltui stop`
alone only knows an agent of one slot)."""

from __future__ import annotations

from sgltui.tui.model import ACTIVE, TuiModel


def exit_note(model: TuiModel, fleet: bool) -> str:
    demo = ""
    if model.demo_load:
        demo = (
            " The demo load keeps running too; `sgltui demo --stop` stops it and the demo servers."
        )
    if not model.connected:
        return (
            "sgltui: closed; the agent did not answer at the end, so what runs is not known "
            "here: `sgltui status` says."
        )
    running = [s for s in model.slots if s.state in ACTIVE]
    warm = [(s.id, sb.profile) for s in model.slots for sb in s.standbys]
    gateways = [
        p
        for p in model.pools
        if len(p.slots) > 1 and not p.across_hosts and p.gateway is not None and p.gateway.pid
    ]
    if not running and not warm and not gateways:
        return (
            "sgltui: closed; no server is running (the agent stays up; `sgltui agent stop` ends it)."
            + demo
        )
    parts = [f"slot {s.id}: {s.profile} {s.state} on {s.host}:{s.port}" for s in running]
    parts += [f"{profile} kept warm on slot {sid}" for sid, profile in warm]
    parts += [f"pool {p.name}'s gateway pid {p.gateway.pid}" for p in gateways if p.gateway]
    desc = ", ".join(parts)
    if fleet:  # each host's servers are stopped by that host's sgltui
        return (
            f"sgltui: closed; servers keep running ({desc}). Reopen with `sgltui`; stop one "
            "with `sgltui --host HOST stop --slot SLOT`."
        )
    return (
        f"sgltui: closed; servers keep running ({desc}). Reopen with `sgltui`; "
        f"{_how_to_stop(model, running, bool(warm or gateways))}.{demo}"
    )


def _how_to_stop(model: TuiModel, running: list, more: bool) -> str:
    """The command that stops what runs: `sgltui stop` names no slot only on an agent of one."""
    everything = "`sgltui agent stop --stop-servers` stops everything"
    if not running:
        return everything
    if len(model.slots) == 1:
        how = "stop with `sgltui stop`"
    else:
        pools = {p.name for s in running if (p := model.pool_of(s.id)) is not None}
        pooled = all(model.pool_of(s.id) is not None for s in running)
        if pooled and len(pools) == 1:
            how = f"stop with `sgltui stop --pool {pools.pop()}`"
        else:
            how = "stop one with " + " or ".join(f"`sgltui stop --slot {s.id}`" for s in running)
    return f"{how}; {everything}" if more else how
