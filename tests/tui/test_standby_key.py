"""k on a profile row keeps it warm (agent/standby.py): asked first, saying what it costs; the
row and the memory pane show what is kept warm."""

from __future__ import annotations

from textual.widgets import OptionList

from sgltui.tui import typed
from sgltui.tui.screens import Confirm
from sgltui.tui.views import profile_option, standby_lines

from .helpers import ScriptedSource, app_with, ops, status_with, until

SIZE = (120, 40)
ASLEEP = {
    "profile": "demo-base",
    "state": "asleep",
    "host_bytes": 54 * 10**9,
    "gpu_bytes": 2 * 2**30,
    "port": 31000,
}


async def test_k_asks_first_then_keeps_the_highlighted_profile_warm():
    src = ScriptedSource(status_with(running=0))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        rows = app.query_one("#profile-list", OptionList)
        # the list fills after the first status (under load, later than a fixed pause)
        await until(pilot, lambda: any(o.id != "demo-mtp" for o in rows.options))
        names = [o.id for o in rows.options]
        other = next(n for n in names if n != "demo-mtp")
        rows.highlighted = names.index(other)
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        question = app.screen.question
        assert f"Keep [b]{other}[/] warm?" in question and "demo-mtp" in question
        assert "sleeps" in question and "seconds" in question
        assert "restarts once first" in question  # its server was started without the saver
        await pilot.press("y")
        await until(pilot, lambda: ops(src, "standby_add"))
        assert ops(src, "standby_add")[0]["profile"] == other


async def test_k_on_the_serving_profile_says_why_not():
    src = ScriptedSource(status_with(running=0))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        rows = app.query_one("#profile-list", OptionList)
        await until(pilot, lambda: any(o.id != "demo-mtp" for o in rows.options))
        rows.highlighted = [o.id for o in rows.options].index("demo-mtp")  # the serving one
        await pilot.press("k")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, Confirm) and ops(src, "standby_add") == []


def test_a_profile_kept_warm_is_marked_and_its_memory_shown():
    slot = typed.slot(status_with(running=0, standbys=[ASLEEP])["slots"][0])
    row = profile_option(typed.profile({"name": "demo-base", "key": "1"}), [slot])
    assert "warm" in row
    plain = profile_option(typed.profile({"name": "demo-x", "key": "9"}), [slot])
    assert "warm" not in plain
    (line,) = standby_lines([slot])
    assert "demo-base beside demo-mtp" in line and "host 50.3 GiB pinned" in line
