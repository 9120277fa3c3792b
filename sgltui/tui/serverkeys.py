"""The keys that act on the current slot's server besides a swap (swap.py): stop, restart,
keep a profile warm, attach a server found running outside sgltui. Each is one flow that awaits
its dialog (it runs in a worker of the app's); the app is reached through ServerKeysHost.
"""

from __future__ import annotations

from typing import Protocol

from textual.markup import escape

from sgltui.tui import standby
from sgltui.tui.config import TuiConfig
from sgltui.tui.model import ACTIVE
from sgltui.tui.screens import Confirm, DrainChoice
from sgltui.tui.swap import SwapHost


class ServerKeysHost(SwapHost, Protocol):
    config: TuiConfig


def _active_profile(host: ServerKeysHost) -> str | None:
    """The profile running in the current slot, or None after telling the user why nothing
    happens."""
    if host.refused_read_only() or host.refused_down(host.model.current_id):
        return None
    slot = host.model.current
    if not slot or slot.state not in ACTIVE:
        host.notify(f"no server is running in slot {host.model.current_id or '-'}")
        return None
    return str(slot.profile)


async def stop(host: ServerKeysHost) -> None:
    """x: stop the current slot's server; asks how to treat the requests in flight."""
    name = _active_profile(host)
    if name is None:
        return
    where = host.slot_args()
    sid = str(where.get("slot", ""))
    running = host.model.running_requests(sid)
    if running > 0:
        live = lambda: host.model.running_requests(sid)  # noqa: E731
        drain = await host.push_screen_wait(DrainChoice(f"Stop {name}", name, running, live=live))
        if drain:
            await host.send("stop", done=f"stopping {name} ({drain})", drain=drain, **where)
        return
    if host.config.confirm_stop:
        question = f"Stop [b]{escape(name)}[/]? No requests are in flight."
        if not await host.push_screen_wait(Confirm(question)):
            return
    await host.send("stop", done=f"stopping {name}", drain="wait", **where)


async def restart(host: ServerKeysHost) -> None:
    """r: restart the current slot's server with its profile re-read, once confirmed."""
    name = _active_profile(host)
    if name is None:
        return
    where = host.slot_args()
    running = host.model.running_requests(where.get("slot", ""))
    question = f"Restart [b]{escape(name)}[/]?" + (
        f" {running} request(s) in flight will be cut." if running else ""
    )
    if await host.push_screen_wait(Confirm(question)):
        await host.send("restart", done=f"restarting {name}", **where)


async def keep_warm(host: ServerKeysHost, name: str | None) -> None:
    """k: keep the highlighted profile `name` warm on the current slot (tui/standby.py asks)."""
    if name is None or host.refused_read_only():
        return
    slot = host.model.current
    refused = standby.refusal(name, slot)
    if refused:
        host.notify(refused, severity="warning")
        return
    took = standby.last_start_s(host.model.state, name)
    where = host.slot_args()
    if await host.push_screen_wait(Confirm(standby.question(name, slot, took))):
        await host.send("standby_add", done=f"keeping {name} warm", profile=name, **where)


async def attach_found(host: ServerKeysHost, pid: int | None) -> None:
    """A: attach the highlighted 'not managed' row's server (`pid`; else the only one found)."""
    found = host.model.unmanaged
    pick = [u for u in found if u.pid == pid] or (found if len(found) == 1 else [])
    if not pick:
        host.notify(
            "no server to attach: move onto a dimmed 'not managed' row"
            if found
            else "no server of yours runs outside sgltui"
        )
        return
    u = pick[0]
    if not u.url or u.note:
        host.notify(f"cannot attach pid {u.pid}: {u.note or 'it does not listen yet'}")
        return
    await host.send("attach", done=f"attaching {u.url}", url=u.url)
