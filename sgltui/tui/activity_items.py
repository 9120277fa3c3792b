"""The Activity tab's lines: which events make one, and what it says (a command and who sent
it, a slot's state, a swap's outcome, a bench, a pool's roll, a gateway, a disk error)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    a = {k: v for k, v in args.items() if k not in _UNSAID}
    parts = [op]
    profile = a.pop("profile", None)
    if profile:
        parts.append(f"to {profile}" if op == "swap" else str(profile))
    for where in ("slot", "pool"):
        if a.get(where) not in (None, ""):
            parts.append(f"on {where} {a.pop(where)}")
    extras = []
    drain = a.pop("drain", None)
    if drain and drain != "wait":
        extras.append(f"drain {drain}")
    skipped = a.pop("force", None)
    if isinstance(skipped, list) and skipped:
        checks = ", ".join(map(str, skipped))
        extras.append(f"skipping the {checks} check{'s' if len(skipped) > 1 else ''}")
    if a.pop("rollback", True) is False:
        extras.append("no rollback")
    if a.pop("confirm", False) is True:
        extras.append("confirmed")
    if a.get("timeout") == 30.0:  # the stop's default drain wait
        a.pop("timeout")
    for k, v in a.items():
        if v in (None, False, "", [], {}):
            continue
        extras.append(k.replace("_", " ") if v is True else f"{k.replace('_', ' ')} {v}")
    return " ".join(parts) + (f" ({', '.join(extras)})" if extras else "")


def activity_item(
    ev: dict[str, Any], own_client: str | None, clock: Callable[[], float]
) -> ActivityItem | None:
    """The Activity tab's line for an event, if it makes one (live and from history alike);
    `own_client` is this TUI's client name (others' commands are marked foreign)."""
    t = ev.get("type", "")
    client = ev.get("client")
    foreign = bool(client) and client != own_client
    ts = float(ev.get("ts") or clock())
    if t == "command":
        args = ev.get("args") or {}
        text = command_text(str(ev.get("op") or "?"), args if isinstance(args, dict) else {})
        return ActivityItem(ts, client, text, "info", foreign)
    if t == "command.refused":
        return ActivityItem(
            ts,
            client,
            f"refused {ev.get('op', '?')}: {ev.get('reason', '')}",
            "warning",
            foreign,
        )
    if t == "slot.state":
        st = ev.get("state")
        level = "error" if st in ("failed", "crashed") else "info"
        text = f"slot {ev.get('slot')}: {st}"
        cause = ev.get("cause") or {}
        if cause.get("summary"):
            text += f" ({cause['summary']})"
        elif ev.get("reason"):
            text += f" ({ev['reason']})"
        return ActivityItem(ts, client, text, level, False)
    if t == "swap.done":
        total = (ev.get("timings_s") or {}).get("total")
        verdict = "done" if ev.get("ok") else ("rolled back" if ev.get("rolled_back") else "failed")
        extra = f" in {units.span(total)}" if isinstance(total, (int, float)) else ""
        kind = ev.get("kind") or "cold"  # warm: a standby was woken (agent/standby.py)
        return ActivityItem(
            ts,
            client,
            f"swap {ev.get('from')} -> {ev.get('to')} {verdict} ({kind}){extra}",
            "info" if ev.get("ok") else "error",
            False,
        )
    if t in ("bench.start", "bench.done"):
        text = f"{t.replace('.', ' ')} {ev.get('run_id', '')}".strip()
        put = ev.get("put_back") or {}
        if put.get("profile"):  # the sweep swapped the slot back to what it served
            text += f" · {put_back_line(put)}"
        cut = ev.get("cut")
        if isinstance(cut, dict):  # a swap the user confirmed stopped it
            text += f" · {cut_line(cut)}"
        bad = put.get("ok") is False or isinstance(cut, dict)
        return ActivityItem(ts, client, text, "error" if bad else "info", foreign)
    if t == "disk.error":
        return ActivityItem(
            ts, client, f"session disk error: {ev.get('error', '')}", "error", False
        )
    if t in ("agent.start", "agent.stop", "agent.adopt"):
        return ActivityItem(ts, client, t.replace(".", " "), "info", False)
    if t == "pool.roll":
        return _roll_item(ev, ts, client)
    if t == "endpoint":  # the agent endpoint woke, started, evicted or refused (agent/endpoint.py)
        bad = ev.get("action") in ("refused", "failed")
        return ActivityItem(ts, client, str(ev.get("text") or ""), "warning" if bad else "info")
    if t in ("gateway.died", "gateway.error"):
        why = ev.get("error") or f"exit code {ev.get('code')}"
        return ActivityItem(ts, client, f"pool {ev.get('pool')}: gateway {why}", "error", False)
    if t == "gateway.restarted":
        return ActivityItem(ts, client, f"pool {ev.get('pool')}: gateway back", "info", False)
    return None


def _roll_item(ev: dict[str, Any], ts: float, client: str | None) -> ActivityItem | None:
    """A rolling swap's step in the Activity tab: begin, each slot's progress, its end."""
    pool, step, slot = ev.get("pool"), ev.get("step"), ev.get("slot")
    if step == "begin":
        return ActivityItem(ts, client, f"pool {pool}: rolling to {ev.get('profile')}", "info")
    if step == "stopped" or ev.get("error"):
        text = f"pool {pool}: roll stopped at slot {slot}: {ev.get('error') or '?'}"
        return ActivityItem(ts, client, text, "error")
    if step in ("done", "end"):
        what = f"slot {slot} done" if step == "done" and slot else "roll done"
        total = ev.get("total_s")
        if step == "end" and isinstance(total, (int, float)):
            what += f" in {units.span(total)}"  # the whole roll, as a swap says its time
        return ActivityItem(ts, client, f"pool {pool}: {what}", "info")
    return None
