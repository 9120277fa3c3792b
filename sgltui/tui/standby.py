"""The TUI's "keep warm" question (key k on a profile row): what a standby costs, asked first.

A standby (agent/swap/standby.py) costs one cold start of the profile now, while the serving one
sleeps and its clients wait at the front: the question says how long that took the last time
this session launched the profile (or that it is not known yet).
"""

from __future__ import annotations

from rich.markup import escape

from sgltui import protocol
from sgltui.core import units


def last_start_s(state: protocol.SessionState, profile: str) -> float | None:
    """Seconds the latest launch of `profile` in this session took to be ready."""
    for rec in reversed(state.launches):
        if rec.profile == profile and rec.ready_at is not None:
            return max(0.0, rec.ready_at - rec.ts)
    return None


def question(name: str, slot: protocol.SlotStatus | None, took: float | None) -> str:
    """The confirmation text; a reason to refuse comes first when there is one."""
    serving = slot.profile if slot is not None and slot.state == protocol.SlotState.READY else None
    how_long = (
        f"about {units.span(took)} (its last start)" if took is not None else "one cold start"
    )
    held = (
        f" while [b]{escape(serving)}[/] sleeps and its clients wait at the front"
        if serving
        else ""
    )
    once = ""
    if serving and slot is not None and "--enable-memory-saver" not in slot.command:
        # agent/swap/standby_ops.py: a server started without the memory saver cannot sleep
        once = f" [b]{escape(serving)}[/] restarts once first, able to sleep (one more start)."
    return (
        f"Keep [b]{escape(name)}[/] warm? It starts now, {how_long},{held}; then it sleeps "
        f"with its weights in host RAM, and a swap to it takes seconds.{once}"
    )


def refusal(name: str, slot: protocol.SlotStatus | None) -> str | None:
    if slot is None:
        return "no slot to keep it warm on"
    if slot.profile == name and slot.state == protocol.SlotState.READY:
        return f"{name} serves on slot {slot.id} already; keep another profile warm"
    if any(sb.profile == name for sb in slot.standbys):
        return f"{name} is kept warm on slot {slot.id} already"
    return None
