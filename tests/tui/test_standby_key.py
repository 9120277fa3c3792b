"""k on a profile row keeps it warm (agent/swap/standby.py): asked first, saying what it costs; the
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


def test_the_memory_pane_says_a_sleepers_estimate_until_it_is_measured():
    """Issue 45: what a standby pins is said before (the estimate) and measured after its
    release; the pane says which, and the estimate beside a measurement that differs."""
    gib = 2**30
    before = dict(ASLEEP, host_bytes=16 * gib, host_estimate_bytes=16 * gib, measured=False)
    (line,) = standby_lines([typed.slot(status_with(running=0, standbys=[before])["slots"][0])])
    assert "host 16.0 GiB pinned (estimate)" in line
    after = dict(before, host_bytes=43 * gib, measured=True)
    (line,) = standby_lines([typed.slot(status_with(running=0, standbys=[after])["slots"][0])])
    assert "host 43.0 GiB pinned (measured; said host 16.0 GiB)" in line
    close = dict(before, host_bytes=int(16.5 * gib), measured=True)
    (line,) = standby_lines([typed.slot(status_with(running=0, standbys=[close])["slots"][0])])
    assert line.endswith("pinned (measured)")


def _warm_gpu_status():
    """A slot serving on GPU 0 with a standby asleep beside it (pid 5151, 7 GiB on the GPU)."""
    status = status_with(running=0, standbys=[dict(ASLEEP, pid=5151)])
    gpu = status["telemetry"]["gpus"][0]
    seven = 7 * 2**30
    gpu["used_bytes"] = (gpu.get("used_bytes") or 0) + seven
    gpu["processes"] = [*(gpu.get("processes") or []),
                        {"pid": 5151, "used_bytes": seven, "slot": None, "name": "sgltui.sim"}]  # fmt: skip
    return status


def test_top_names_the_standby_not_another_process():
    """Issue 51 item 12: `top` said "other pid ...: 7.0 GiB (sgltui.sim)" for sgltui's own
    sleeper: it names it as the standby of its profile."""
    import msgspec

    from sgltui import protocol
    from sgltui.commands.top_text import render

    status = msgspec.convert(_warm_gpu_status(), protocol.StatusReply, strict=False)
    text = render(status, now=0.0)
    assert "slot 0's standby demo-base (asleep) pid 5151: 7.0 GiB" in text, text
    assert "other pid 5151" not in text


async def test_the_memory_bar_draws_the_standby_as_the_standby():
    """Issue 51 item 12: the standby's GPU memory was drawn as other processes' (▓); it has its
    own segment (▒), as its line under the bar says."""
    import msgspec

    from sgltui.protocol import GpuView
    from sgltui.tui.widgets.memory import MemoryPane

    app = app_with(ScriptedSource(_warm_gpu_status()))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        pane = app.query_one(MemoryPane)
        await until(pilot, lambda: any("▒" in p[0] for p in pane._bar_markup(100)))
        bar = next(p[0] for p in pane._bar_markup(100) if p[0].startswith("GPU0"))
        # the other processes' segment is what it was without the standby
        before = msgspec.convert(status_with(running=0)["telemetry"]["gpus"][0], GpuView)
        from sgltui.tui.views import gpu_row_parts

        alone = gpu_row_parts(before, 100)[0][0]
        assert bar.count("▓") == alone.count("▓") and bar.count("▒") >= 2, (bar, alone)
        assert any("▒" in p[0] and "demo-base beside" in p[0] for p in pane._bar_markup(100))
