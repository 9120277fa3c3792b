"""The app against a real agent and real simulator processes: start, swap by key, stop, logs.

Uses the agent area's `agent` fixture (tests/fixtures/agent.py): a detached agent on the test's
state dir, with fast simulator profiles written into a tmp profiles dir. Keys 7 and 8 are used
because the shipped profiles already take 1-5.
"""

from __future__ import annotations

import asyncio

import pytest

from sgltui import protocol
from sgltui.tui.screens import Confirm
from sgltui.tui.source import LiveSource
from sgltui.tui.widgets.logs import LogView

from .helpers import app_with, until

pytest.importorskip("sgltui.client")

SIZE = (120, 40)


def slot0(app):
    slot = app.model.slot("0")
    return protocol.to_builtins(slot) if slot is not None else {}


async def test_start_swap_stop_and_filter_logs_against_the_simulator(agent):
    agent.write_profile("tui-a", key="7")
    agent.write_profile("tui-b", key="8")
    source = LiveSource(agent.state_dir, profiles_dirs=[agent.profiles_dir], autostart=False)
    app = app_with(source)
    notes: list[str] = []  # what the app told the user, for a failure's message
    notify = app.notify
    app.notify = lambda message, *a, **k: (notes.append(str(message)), notify(message, *a, **k))  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected, timeout=20)
        await until(pilot, lambda: app.model.profile_for_key("7"), timeout=20)

        await pilot.press("7")  # nothing runs: the key starts the profile
        await until(
            pilot,
            lambda: slot0(app).get("profile") == "tui-a" and slot0(app).get("state") == "ready",
            timeout=40,
        )
        await asyncio.to_thread(agent.status)  # lets the fixture note the server's process group

        # A server runs with no requests (the model says so once a reading from after ready
        # is in): the key swaps at once, no drain question.
        await until(pilot, lambda: app.model.running_requests("0") == 0, timeout=20)
        await pilot.press("8")
        await until(
            pilot,
            lambda: (
                slot0(app).get("profile") == "tui-b"
                and slot0(app).get("state") == "ready"
                and not slot0(app).get("swap")
            ),
            timeout=60,
            show=lambda: (
                type(app.screen).__name__,
                app.model.running_requests("0"),
                notes,
                list(app.model.activity)[-3:],
            ),
        )
        await asyncio.to_thread(agent.status)
        swaps = [
            e for e in await asyncio.to_thread(agent.events, "command") if e.get("op") == "swap"
        ]
        assert (
            swaps
            and swaps[-1]["args"]["profile"] == "tui-b"
            and swaps[-1]["client"].startswith("tui:")
        )
        assert any(
            i.text.startswith("swap") and "tui-a -> tui-b" in i.text for i in app.model.activity
        )

        # The log pane shows the new server's own output; filter it down to the readiness line.
        view = app.query_one(LogView)
        await until(
            pilot,
            lambda: any("ready to roll" in line.text for line in app.logbuf.lines),
            timeout=20,
        )
        await pilot.press("slash", *"ready to roll", "enter")
        await until(pilot, lambda: app.logbuf.filter_text == "ready to roll")
        await pilot.pause(0.2)
        shown = ["".join(seg.text for seg in strip) for strip in view.lines]
        assert shown and all("ready to roll" in s for s in shown)
        assert len(shown) < len(app.logbuf.lines)

        # x asks "Stop?" only when no request is in flight (else it offers drain choices) and
        # only once the filter box has handed the focus back: wait for both, as a user would see.
        await until(
            pilot,
            lambda: app.model.running_requests("0") == 0 and app.focused is view,
            timeout=20,
            show=lambda: (app.model.running_requests("0"), app.focused),
        )
        await pilot.press("x")
        await until(
            pilot,
            lambda: isinstance(app.screen, Confirm),
            timeout=10,
            show=lambda: (app.screen, app.focused, slot0(app), app.model.running_requests("0")),
        )
        await pilot.press("y")
        await until(pilot, lambda: slot0(app).get("state") == "stopped", timeout=40)
        await pilot.press("q")
    assert "no server is running" in app.return_value
    assert (await asyncio.to_thread(agent.slot))["state"] == "stopped"


async def test_reconnects_when_the_agent_restarts(agent):
    source = LiveSource(agent.state_dir, profiles_dirs=[agent.profiles_dir], autostart=False)
    app = app_with(source)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected, timeout=20)
        first = app.model.agent.pid
        await asyncio.to_thread(agent.call, "shutdown", stop_servers=True)
        await until(pilot, lambda: not app.model.connected, timeout=20)
        assert "agent unreachable" in app.model.connection_note
        await asyncio.to_thread(agent.start)
        await until(
            pilot,
            lambda: app.model.connected and app.model.agent.pid != first,
            timeout=30,
        )
