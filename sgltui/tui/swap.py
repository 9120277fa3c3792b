"""A profile's swap, top to bottom: the key, the slot or pool, the launcher, the preflight, the
requests in flight, the op. Each question is a dialog the flow awaits (it runs in a worker of
the app's), so the whole conversation reads as one function, not a chain of callbacks.

The app is reached through SwapHost, the few things a swap needs of it.
"""

from __future__ import annotations

from typing import Any, Protocol

from textual.markup import escape
from textual.screen import Screen

from sgltui import protocol
from sgltui.tui.fmt import one_line
from sgltui.tui.model import ACTIVE, BenchRun, TuiModel
from sgltui.tui.notifies import Notifies
from sgltui.tui.screens import Confirm, DrainChoice, SlotOrPool
from sgltui.tui.source import SOURCE_ERRORS, TuiSource, ask


class SwapHost(Notifies, Protocol):
    """What a swap needs of the app."""

    model: TuiModel
    source: TuiSource
    picked_pool: str | None  # the pool whose row the slots view has picked

    async def push_screen_wait(self, screen: Screen[Any], *, mode: str | None = None) -> Any: ...

    def refused_read_only(self) -> bool: ...

    def key_of(self, binding_id: str) -> str: ...  # a refusal's TUI wording names its keys

    def refused_down(self, slot_id: str | None) -> bool: ...

    def slot_args(self) -> dict[str, Any]: ...

    async def send(self, op: str, done: str | None = None, **args: Any) -> None: ...


async def key_pressed(host: SwapHost, key: str) -> None:
    """A profile's hot-swap key: refused on a clash; on a pool's row the pool rolls; a slot of
    a pool asks whether the slot alone or the pool; asks before the launcher changes."""
    model = host.model
    found = model.profiles_for_key(key)
    if not found:
        host.notify(f"no profile has key {key}", severity="warning", markup=False)
        return
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        host.notify(
            f"key {key} is given to {names}: it does nothing until each has its own key "
            "(`sgltui profiles validate`)",
            severity="error",
            markup=False,
            timeout=8,
        )
        return
    name = found[0].name
    if host.refused_read_only():
        return
    picked = next((p for p in model.pools if p.name == host.picked_pool), None)
    if picked is not None and model.selected is None:
        # On a pool's row: the pool, one slot at a time (nothing to ask: the row says it).
        if await launcher_ok(host, name):
            await swap_pool(host, name, picked.name)
        return
    if host.refused_down(model.current_id):
        return
    pool = model.pool_of(model.current_id or "")
    choice = "slot"
    if pool is not None and len(pool.slots) > 1:
        # Several slots behind one endpoint: this slot alone, or the pool one slot at a time.
        sid = model.current_id or "?"
        choice = await host.push_screen_wait(SlotOrPool(name, sid, pool.name, len(pool.slots)))
    if choice not in ("slot", "pool") or not await launcher_ok(host, name):
        return
    if choice == "pool" and pool is not None:
        await swap_pool(host, name, pool.name)
    else:
        await swap_to(host, name)


async def launcher_ok(host: SwapHost, name: str) -> bool:
    """sim -> real SGLang (or back) is a different machine's worth of work: ask first."""
    model = host.model
    slot = model.current
    current = slot.profile if slot and slot.state in ACTIVE else None
    now = model.profile(current)
    was = slot.resolved.launcher if slot and slot.resolved else None
    was = was or (now.launcher if now else None)
    target = model.profile(name)
    new = target.launcher if target else None
    if current and was and new and was != new and current != name:
        question = (
            f"Replace [b]{escape(str(current))}[/] ({escape(launcher_word(was))}) with "
            f"[b]{escape(name)}[/] ({escape(launcher_word(new))})?"
        )
        return bool(await host.push_screen_wait(Confirm(question)))
    return True


async def swap_to(host: SwapHost, name: str) -> None:
    """Start `name`, or swap the current slot to it: the agent's preflight checks run first
    (a target that cannot start is refused before any dialog or stop), then it asks how to
    treat requests in flight."""
    model = host.model
    if host.refused_read_only() or host.refused_down(model.current_id):
        return
    slot = model.current
    state = slot.state if slot else None
    if slot and slot.swap:
        host.notify("a swap is already in progress", severity="warning")
        return
    if slot and slot.profile == name and state in ("launching", "ready"):
        host.notify(f"{name} is already {state}", markup=False)
        return
    where = host.slot_args()
    try:
        res: protocol.PreflightReply = await ask(host.source, "preflight", profile=name, **where)
    except SOURCE_ERRORS as exc:  # shown (a malformed reply too); nothing is started
        host.notify(one_line(exc, host.key_of), title="preflight", severity="error", markup=False)
        return
    if not res.ok:
        # A failed check: what failed and its fix, and a dialog whose Yes skips that check
        # (the agent's line ends with the CLI's `--force CHECK`, no use to someone in the TUI).
        bad = next((c for c in res.checks if not c.ok and not c.skipped), None)
        if bad is None:
            host.notify(
                res.error or f"{name} would not start: its preflight checks failed",
                title="not started",
                severity="error",
                markup=False,
                timeout=10,
            )
            return
        fix = f"; {bad.fix}" if bad.fix else ""
        question = (
            f"[b]{escape(name)}[/] would not start: {escape(bad.message + fix)}\n\n"
            f"Start it anyway, skipping the {escape(bad.name)} check?"
        )
        if not await host.push_screen_wait(Confirm(question)):
            return
        where = dict(where, force=[bad.name])
    sid = where.get("slot")
    slot = model.slot(sid) if sid is not None else model.current
    if (slot.state if slot else None) not in ACTIVE:
        await host.send("start", done=f"starting {name}", profile=name, **where)
        return
    bench = model.bench_on(slot.id if slot else None)
    if bench is not None:
        # The requests in flight are the bench's: the question is the bench, not the drain.
        if await host.push_screen_wait(Confirm(bench_question(bench, "swap", name))):
            done = f"swapping to {name} (bench {bench.run_id} stopped)"
            await host.send("swap", done=done, profile=name, drain="wait", confirm=True, **where)
        return
    running = model.running_requests(slot.id) if slot else 0
    drain, done = "wait", f"swapping to {name}"
    if running > 0:
        drain = await host.push_screen_wait(
            DrainChoice(
                f"Swap to {name}",
                str(slot and slot.profile),
                running,
                live=lambda: model.running_requests(slot.id) if slot else 0,
            )
        )
        if not drain:
            return
        done = f"swapping to {name} ({drain})"
    if res.pinned is not None:
        # a lease, a pinned job or a bench holds the slot (the preflight said): asked here, the
        # swap goes out confirmed, once (not refused first, then asked, then sent again)
        if not await host.push_screen_wait(
            Confirm(pin_question(f"swap refused: {res.pinned.what}", "swap"))
        ):
            return
        where = dict(where, confirm=True)
    await host.send("swap", done=done, profile=name, drain=drain, **where)


async def swap_pool(host: SwapHost, name: str, pool: str) -> None:
    """Swap every slot of `pool` to `name`, one slot at a time (the agent rolls it: each
    slot leaves the gateway, drains its own requests, swaps and comes back before the
    next); slots that run nothing are started. Requests keep flowing to the others, so
    nothing asks how to drain."""
    model = host.model
    if host.refused_read_only():
        return
    slots = [s for s in model.slots if s.id in model.pool_slots(pool)]
    if any(s.swap for s in slots):
        host.notify(f"a swap is already in progress in pool {pool}", severity="warning")
        return
    row = next((p for p in model.pools if p.name == pool), None)
    # A fleet.toml pool whose gateway is not up is started (`up`), its slots ready or not.
    not_up = row is not None and row.across_hosts and (row.gateway is None or not row.gateway.pid)
    if slots and all(s.state in ACTIVE for s in slots) and not not_up:
        await host.send("swap", done=f"rolling pool {pool} to {name}", profile=name, pool=pool)
    elif not_up:  # still "swap": the fleet source, whose view is fresher, rolls it if up
        await host.send("swap", done=f"starting {name} on pool {pool}", profile=name, pool=pool)
    else:
        await host.send("start", done=f"starting {name} on pool {pool}", profile=name, pool=pool)


def bench_question(bench: BenchRun, op: str, name: str | None = None) -> str:
    """The question before a swap or restart of the slot a bench sweeps: it names the bench and
    says what happens to it."""
    p = bench.progress
    at = f", point {p.point}/{p.points}" if p is not None and p.point and p.points else ""
    target = f" to [b]{escape(name)}[/]" if name else ""
    return (
        f"Bench run [b]{escape(bench.run_id)}[/] is using slot {escape(str(bench.slot))}{at}.\n"
        f"A {op} stops it; its result is marked as cut by this {op}.\n\n"
        f"{op.capitalize()}{target} anyway?"
    )


def pin_question(message: str, op: str) -> str:
    """The question before a swap or restart of a slot a lease or a pinned job holds: the
    refusal's words, then what happens to the job."""
    return (
        f"{escape(message)}.\nIt pauses, then resumes on the new server.\n\n"
        f"{op.capitalize()} anyway?"
    )


def launcher_word(launcher: str) -> str:
    return {"sim": "simulator", "sglang": "real SGLang"}.get(launcher, launcher)
