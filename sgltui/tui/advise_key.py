"""P: accept the Insight pane's proposal (core/advice.py): write it as a profile that extends
the serving one, in the user's profile folder, then offer to swap to it now or keep it warm
beside the server first (a standby: the swap then takes seconds). One flow in a worker of the
app's; the file is written in a thread."""

from __future__ import annotations

import asyncio
from typing import Protocol

from sgltui.core import advice, locations
from sgltui.tui import serverkeys, swap
from sgltui.tui.screens import AcceptChoice
from sgltui.tui.serverkeys import ServerKeysHost
from sgltui.tui.widgets.insight import InsightPane


class AdviceHost(ServerKeysHost, Protocol):
    def insight(self) -> InsightPane: ...


async def accept(host: AdviceHost) -> None:
    if host.refused_read_only():
        return
    pane = host.insight()
    await pane.advice_now(host.model)
    best = pane.proposal
    serving = pane.advice.serving if pane.advice else None
    if best is None or serving is None:
        why = pane.advice.notes[0] if pane.advice and pane.advice.notes else None
        host.notify(why or "no proposal for the serving profile now", markup=False)
        return
    folder = locations.config_dir() / "profiles"
    try:
        path = await asyncio.to_thread(advice.write_accepted, serving, best, folder)
    except OSError as exc:
        host.notify(f"could not write {best.name}: {exc}", severity="error", markup=False)
        return
    choice = await host.push_screen_wait(AcceptChoice(best, str(path), serving))
    if choice == "swap":
        await swap.swap_to(host, best.name)
    elif choice == "warm":
        await serverkeys.keep_warm(host, best.name)
    else:
        host.notify(f"{best.name} written: its row in Profiles starts it", markup=False)
