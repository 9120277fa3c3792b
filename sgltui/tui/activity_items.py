"""The Activity tab's lines: which events make one, and what it says (a command and who sent
it, a slot's state, a swap's outcome, a bench, a pool's roll, a gateway, a disk error)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sgltui.bench.report import put_back_line
from sgltui.core import units


@dataclass
class ActivityItem:
    """One line of the activity pane: a command or a notable event, with who issued it."""

    ts: float
    client: str | None
    text: str
    level: str = "info"  # info | warning | error
    foreign: bool = False  # issued by another client (CLI, a second TUI)


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
        shown = " ".join(
            f"{k}={v}"
            for k, v in args.items()
            if k not in ("profiles_dirs", "spec") and v is not None
        )
        return ActivityItem(ts, client, f"{ev.get('op', '?')} {shown}".strip(), "info", foreign)
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
        return ActivityItem(
            ts, client, text, "info" if put.get("ok") is not False else "error", foreign
        )
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
        return ActivityItem(ts, client, f"pool {pool}: {what}", "info")
    return None
