"""The Activity tab's lines: which events make one, and what it says (a command and who sent
it, a slot's state, a swap's outcome, a bench, a pool's roll, a gateway, a disk error)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sgltui import protocol
from sgltui.bench.report import put_back_line
from sgltui.core import units
from sgltui.core.bench_cut import cut_line


@dataclass
class ActivityItem:
    """One line of the activity pane: a command or a notable event, with who issued it."""

    ts: float
    client: str | None
    text: str
    level: str = "info"  # info | warning | error
    foreign: bool = False  # issued by another client (CLI, a second TUI)


# Arguments a person does not need to read: how the client waits, where it looks for profiles,
# a bench's whole spec (its run says it).
_UNSAID = ("profiles_dirs", "spec", "wait")


def command_text(op: str, args: dict[str, Any]) -> str:
    """A command in words ("swap to demo-no-mtp on slot 0 (drain force, confirmed)"), not its
    raw arguments ("swap slot=0 force=[] ... confirm=False"): defaults and empty values left
    out."""
    # (`in` before each pop: a command's arguments are few, and a pop or get of one that is
    # absent was a call each, ~8 for a status command every few seconds)
    a = {k: v for k, v in args.items() if k not in _UNSAID}
    parts = [op]
    profile = a.pop("profile") if "profile" in a else None
    if profile:
        parts.append(f"to {profile}" if op == "swap" else str(profile))
    for where in ("slot", "pool"):
        if where in a and a[where] not in (None, ""):
            parts.append(f"on {where} {a.pop(where)}")
    extras = []
    drain = a.pop("drain") if "drain" in a else None
    if drain and drain != "wait":
        extras.append(f"drain {drain}")
    skipped = a.pop("force") if "force" in a else None
    if skipped and isinstance(skipped, list):
        checks = ", ".join(map(str, skipped))
        extras.append(f"skipping the {checks} check{'s' if len(skipped) > 1 else ''}")
    if "rollback" in a and a.pop("rollback") is False:
        extras.append("no rollback")
    if "confirm" in a and a.pop("confirm") is True:
        extras.append("confirmed")
    if "timeout" in a and a["timeout"] == 30.0:  # the stop's default drain wait
        del a["timeout"]
    for k, v in a.items():
        if v in (None, False, "", [], {}):
            continue
        extras.append(k.replace("_", " ") if v is True else f"{k.replace('_', ' ')} {v}")
    return " ".join(parts) + (f" ({', '.join(extras)})" if extras else "")


def activity_item(
    event: protocol.EventBase, own_client: str | None, clock: Callable[[], float]
) -> ActivityItem | None:
    """The Activity tab's line for an event, if it makes one (live and from history alike),
    chosen by the event's Struct (protocol.decode_event), never by its words; `own_client` is
    this TUI's client name (others' commands are marked foreign)."""
    client = event.client
    foreign = bool(client) and client != own_client
    ts = float(event.ts or clock())
    if isinstance(event, protocol.Command):
        return ActivityItem(ts, client, command_text(event.op or "?", event.args), "info", foreign)
    if isinstance(event, protocol.CommandRefused):
        text = f"refused {event.op or '?'}: {event.reason}"
        return ActivityItem(ts, client, text, "warning", foreign)
    if isinstance(event, protocol.SlotStateChanged):
        st = event.state
        level = "error" if st in (protocol.SlotState.FAILED, protocol.SlotState.CRASHED) else "info"
        text = f"slot {event.slot}: {st}"
        if event.cause is not None and event.cause.summary:
            text += f" ({event.cause.summary})"
        elif event.reason:
            text += f" ({event.reason})"
        return ActivityItem(ts, client, text, level, False)
    if isinstance(event, protocol.SwapDone):
        return _swap_item(event, ts, client)
    if isinstance(event, (protocol.BenchStart, protocol.BenchDone)):
        return _bench_item(event, ts, client, foreign)
    if isinstance(event, protocol.DiskError):
        text = f"session disk error: {event.error or ''}"
        return ActivityItem(ts, client, text, "error", False)
    if isinstance(event, (protocol.AgentStart, protocol.AgentStop, protocol.AgentAdopt)):
        return ActivityItem(ts, client, _AGENT_WORDS[type(event)], "info", False)
    if isinstance(event, protocol.PoolRoll):
        return _roll_item(event, ts, client)
    # the agent endpoint acted (agent/endpoint/endpoint.py)
    if isinstance(event, protocol.EndpointEvent):
        bad = event.action in ("refused", "failed")
        return ActivityItem(ts, client, event.text, "warning" if bad else "info")
    if isinstance(event, protocol.GatewayDied):
        text = f"pool {event.pool}: gateway exit code {event.code}"
        return ActivityItem(ts, client, text, "error", False)
    if isinstance(event, protocol.GatewayFailed):
        text = f"pool {event.pool}: gateway {event.error or 'error'}"
        return ActivityItem(ts, client, text, "error", False)
    if isinstance(event, protocol.GatewayRestarted):
        return ActivityItem(ts, client, f"pool {event.pool}: gateway back", "info", False)
    return None


_AGENT_WORDS: dict[type[protocol.EventBase], str] = {
    protocol.AgentStart: "agent start",
    protocol.AgentStop: "agent stop",
    protocol.AgentAdopt: "agent adopt",
}


def _swap_item(event: protocol.SwapDone, ts: float, client: str | None) -> ActivityItem:
    total = event.timings_s.get("total")
    verdict = "done" if event.ok else ("rolled back" if event.rolled_back else "failed")
    extra = f" in {units.span(total)}" if isinstance(total, (int, float)) else ""
    # warm: a standby was woken (agent/swap/standby.py)
    text = f"swap {event.from_} -> {event.to} {verdict} ({event.kind}){extra}"
    return ActivityItem(ts, client, text, "info" if event.ok else "error", False)


def _bench_item(
    event: protocol.BenchStart | protocol.BenchDone, ts: float, client: str | None, foreign: bool
) -> ActivityItem:
    word = "start" if isinstance(event, protocol.BenchStart) else "done"
    text = f"bench {word} {event.run_id}".strip()
    put = (event.put_back if isinstance(event, protocol.BenchDone) else None) or {}
    cut = event.cut if isinstance(event, protocol.BenchDone) else None
    if put.get("profile"):  # the sweep swapped the slot back to what it served
        text += f" · {put_back_line(put)}"
    if isinstance(cut, dict):  # a swap the user confirmed stopped it
        text += f" · {cut_line(cut)}"
    bad = put.get("ok") is False or isinstance(cut, dict)
    return ActivityItem(ts, client, text, "error" if bad else "info", foreign)


def _roll_item(event: protocol.PoolRoll, ts: float, client: str | None) -> ActivityItem | None:
    """A rolling swap's step in the Activity tab: begin, each slot's progress, its end."""
    pool, step, slot = event.pool, event.step, event.slot
    if step == "begin":
        return ActivityItem(ts, client, f"pool {pool}: rolling to {event.profile}", "info")
    if step == "stopped" or event.error:
        text = f"pool {pool}: roll stopped at slot {slot}: {event.error or '?'}"
        return ActivityItem(ts, client, text, "error")
    if step in ("done", "end"):
        what = f"slot {slot} done" if step == "done" and slot else "roll done"
        total = event.total_s
        if step == "end" and isinstance(total, (int, float)):
            what += f" in {units.span(total)}"  # the whole roll, as a swap says its time
        return ActivityItem(ts, client, f"pool {pool}: {what}", "info")
    return None
