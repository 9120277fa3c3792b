"""What the user is told on quitting the TUI: which servers keep running and how to stop them
(the agent and its servers outlive the TUI on purpose)."""

from __future__ import annotations

from sgltui.tui.model import ACTIVE, TuiModel


def exit_note(model: TuiModel, fleet: bool) -> str:
    running = [s for s in model.slots if s.state in ACTIVE]
    demo = ""
    if model.demo_load:
        demo = (
            " The demo load keeps running too; `sgltui demo --stop` stops it and the demo servers."
        )
    if not running:
        return (
            "sgltui: closed; no server is running (the agent stays up; `sgltui agent stop` ends it)."
            + demo
        )
    desc = ", ".join(f"slot {s.id}: {s.profile} {s.state} on {s.host}:{s.port}" for s in running)
    if fleet:  # each host's servers are stopped by that host's sgltui
        return (
            f"sgltui: closed; servers keep running ({desc}). Reopen with `sgltui`; stop one "
            "with `sgltui --host HOST stop --slot SLOT`."
        )
    return (
        f"sgltui: closed; servers keep running ({desc}). Reopen with `sgltui`; stop with "
        f"`sgltui stop`.{demo}"
    )
