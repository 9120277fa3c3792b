"""`sgltui replay`: the real app on a recorded session, moved through time with Pilot."""

from __future__ import annotations

import pytest

from sgltui import protocol
from sgltui.tui.replay.app import make_replay_app
from sgltui.tui.replay.bar import TimeCursorBar
from tests.tui.helpers import until

from . import builder

T0 = builder.T0
SIZE = (140, 45)


@pytest.fixture
def app(isolated_env):
    return make_replay_app(builder.build(isolated_env), load_user_themes=False)


def slot0(app):
    slot = app.model.slot("0")
    return protocol.to_builtins(slot) if slot is not None else {}


def shown_at(app, t):
    """What the replay says slot 0 is at t (the reference the screen must match)."""
    return app.replay_source.replay.status_at(t)["slots"][0]


async def opened(app, pilot):
    await until(pilot, lambda: app.first_status.is_set() and app.model.connected)
    await pilot.pause(0.15)


async def at_the_end(app, pilot):
    """Open the replay and jump to its last moment: slot 0 has crashed (the builder's story)."""
    await opened(app, pilot)
    await pilot.press("end")
    await until(pilot, lambda: slot0(app).get("state") == "crashed")


async def test_step_through_events_and_the_screen_follows(app):
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        src = app.replay_source
        assert src.t == src.start and slot0(app)["state"] == "stopped"
        bar = app.query_one(TimeCursorBar)
        assert "+0:00 / 4:20" in bar.describe()
        seen = []
        for _ in range(12):
            await pilot.press("right_square_bracket")
            # The state comes with the event push, the profile with the STATUS re-read after it.
            await until(
                pilot,
                lambda: (
                    (slot0(app).get("state"), slot0(app).get("profile"))
                    == (shown_at(app, src.t)["state"], shown_at(app, src.t)["profile"])
                ),
            )
            seen.append((slot0(app)["profile"], slot0(app)["state"]))
        assert ("demo-no-mtp", "ready") in seen and ("demo-no-mtp", "draining") in seen
        assert ("demo-mtp", "launching") in seen
        assert f"+{int(src.offset) // 60}:{int(src.offset) % 60:02d}" in bar.describe()
        # Activity pane got the recorded events, in order.
        activity = [item.text for item in app.model.activity]
        assert any("swap demo-no-mtp -> demo-mtp done" in a for a in activity)


async def test_seek_back_rebuilds_then_play_moves_forward(app):
    async with app.run_test(size=SIZE) as pilot:
        await at_the_end(app, pilot)
        src = app.replay_source
        assert src.t == src.end and slot0(app)["cause"]["kind"] == "cuda"
        assert app.model.series["gen_throughput"]  # history of the last minutes was rebuilt
        await pilot.press("home")
        await until(pilot, lambda: slot0(app).get("state") == "stopped")
        assert not app.model.series["gen_throughput"]  # nothing had been served at the start
        assert "ready" not in [i.text for i in app.model.activity]
        for _ in range(4):
            await pilot.press("plus")  # 10x -> 30 -> 60 -> 120 -> 300
        assert src.speed == 300.0
        await pilot.press("space")
        assert src.playing
        await until(pilot, lambda: src.t > src.start + 100, timeout=10)
        await pilot.press("space")
        assert not src.playing
        t = src.t
        await pilot.pause(0.3)
        assert src.t == t  # paused means paused
        await until(pilot, lambda: slot0(app).get("state") == shown_at(app, t)["state"])
        assert len(app.model.series["gen_throughput"]) > 30


async def test_goto_box_and_arrow_steps(app):
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        src = app.replay_source
        await pilot.press("g")
        await pilot.press(*"2:10", "enter")  # offset 130 s: demo-mtp serving, bench running
        await until(pilot, lambda: src.t == src.start + 130)
        await until(
            pilot,
            lambda: slot0(app).get("profile") == "demo-mtp" and slot0(app).get("state") == "ready",
        )
        await pilot.press("right")
        assert src.t == src.start + 131
        await pilot.press("left", "left")
        assert src.t == src.start + 129
        await pilot.press("g")
        await pilot.press(*"soon", "enter")  # not a time: the box stays open, the cursor stays put
        await pilot.pause(0.1)
        assert src.t == src.start + 129 and app.query_one("#replay-goto-row").display
        await pilot.press("escape")
        assert not app.query_one("#replay-goto-row").display


async def test_read_only(app):
    async with app.run_test(size=SIZE) as pilot:
        await at_the_end(app, pilot)
        src = app.replay_source
        for key in ("s", "x", "r", "2", "b"):
            await pilot.press(key)
        await pilot.pause(0.2)
        assert slot0(app)["state"] == "crashed" and src.t == src.end
        with pytest.raises(Exception, match="read-only replay"):
            await src.call("start", profile="demo-mtp")
        assert "REPLAY" in str(app.query_one("#topbar").render())


async def test_replayed_commands_do_not_pop_up_notifications(app):
    """Every recorded command is another client's in a replay: they belong in the Activity tab,
    not in a toast each (at 20x they buried the screen)."""
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        for _ in range(12):
            await pilot.press("right_square_bracket")
        await pilot.pause(0.2)
        activity = " ".join(item.text for item in app.model.activity)
        assert "swap" in activity
        assert not [n.message for n in app._notifications]
