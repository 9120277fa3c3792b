"""Shared helpers for the TUI tests (scripted sources, waiting on the app)."""

from __future__ import annotations

import asyncio
import json
import time

from textual.notifications import Notify

from sgltui.tui.app import make_app
from sgltui.tui.config import TuiConfig
from sgltui.tui.widgets.slots import SlotsPane
from tests.support.scripted import ScriptedSource, make_engine, make_slot, make_status


def status_with(state="ready", running=0, profile="demo-mtp", **slot):
    st = make_status([make_slot(profile=profile, state=state, **slot)])
    if st["telemetry"]["engine"]:
        st["telemetry"]["engine"]["0"] = make_engine(0, running=running)
        st["telemetry"]["engine"]["0"]["num_queue_reqs"] = 0
    return st


def app_with(source, **kw):
    kw.setdefault("config", TuiConfig())
    kw.setdefault("load_user_themes", True)
    return make_app(source, **kw)


async def until(pilot, cond, timeout=5.0, show=None):
    """Let the app run until cond() is true (the app works in workers and timers).
    `show()` says what the state was when it timed out."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"condition not reached in {timeout}s" + (f": {show()}" if show else "")
            )
        await pilot.pause(0.02)


def notes_into(said: list[str]):
    """A message hook for run_test that keeps each notification's text in `said`."""

    def hook(msg) -> None:
        if isinstance(msg, Notify):
            said.append(msg.notification.message)

    return hook


def event(type: str, ts: float = 1.0, **data) -> dict:
    """An agent event push, as ScriptedSource.feed takes it."""
    return {"push": "event", "data": {"v": 1, "ts": ts, "type": type, **data}}


def write_bench_run(path, run_id: str, results: list, **doc) -> str:
    """A bench result file as the runner writes it; returns its path for a bench.done event."""
    path.write_text(json.dumps({"v": 1, "run_id": run_id, "results": results, **doc}))
    return str(path)


def ops(source: ScriptedSource, name: str):
    return [args for op, args in source.calls if op == name]


__all__ = [
    "ScriptedSource",
    "app_with",
    "event",
    "until",
    "ops",
    "status_with",
    "write_bench_run",
    "asyncio",
]


async def pick_slot(pilot, app, slot_id: str, timeout: float = 10.0) -> None:
    """Move the slots view's highlight to `slot_id` with the arrow keys, as an operator does,
    and wait for the model to follow."""
    await pick_row(pilot, app, f"slot:{slot_id}", timeout)
    await until(pilot, lambda: app.model.current_id == slot_id, timeout)


async def pick_row(pilot, app, row_id: str, timeout: float = 10.0) -> None:
    """Move the slots view's highlight to the row `row_id` (slot:NAME or pool:NAME) with the
    arrow keys. Each press is checked on the pane's highlight (set by the key itself), not on
    the model, which follows a message later: a loop on the model pressed again before it
    caught up and overshot the row under load (a flaky fleet test)."""
    pane = app.query_one(SlotsPane)
    if not pane.has_focus:
        # The view shows at the app's next draw of the slots, after the model has them.
        await until(pilot, lambda: pane.display, timeout)
        await pilot.press("o")
        await until(
            pilot,
            lambda: pane.has_focus,
            timeout,
            show=lambda: f"focused {app.focused!r} on {app.screen!r}, slots shown {pane.display}",
        )
    ids = [option.id for option in pane.options]
    target = ids.index(row_id)
    for _ in range(len(ids)):
        at = pane.highlighted
        if at == target:
            break
        await pilot.press("down" if at is None or at < target else "up")
        await until(pilot, lambda at=at: pane.highlighted != at, timeout)
