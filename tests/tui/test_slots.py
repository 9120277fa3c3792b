"""Several slots (issue 26): the slots view, a slot picked for the rest of the screen, a
profile key that asks slot or pool, the chart's total with a series per slot. Driven by the
ScriptedSource, so the TUI is tested without the agent side."""

from __future__ import annotations

import pytest
from textual import events
from textual.content import Content

from sgltui.tui import views
from sgltui.tui.screens import DrainChoice, SlotOrPool
from sgltui.tui.widgets.memory import MemoryPane
from sgltui.tui.widgets.profiles import ProfilesPane
from sgltui.tui.widgets.slots import SlotsPane
from sgltui.tui.widgets.throughput import ThroughputPane
from tests.support.scripted import ScriptedSource, make_host_sample, make_host_status, slot_names

from .helpers import app_with, event, ops, status_with, until

SIZE = (120, 40)


async def ready(app, pilot):
    await until(pilot, lambda: app.model.connected and app.first_status.is_set())
    await until(pilot, lambda: not app._flush_scheduled and not app._dirty)


def rows(app) -> list[str]:
    """The rows as read on screen (without their markup)."""
    return [Content.from_markup(str(o.prompt)).plain for o in app.query_one(SlotsPane).options]


async def test_one_slot_has_no_slots_view():
    app = app_with(ScriptedSource(status_with()))
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.pause(0.2)
        assert not app.query_one(SlotsPane).display
        assert not app.screen.has_class("-slots") and not app.logbuf.tag_slots


async def test_slots_view_lists_each_slot_and_its_pool_and_follows_the_samples():
    src = ScriptedSource(make_host_status(2, ["demo-mtp", "demo-no-mtp"]))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await until(pilot, lambda: len(rows(app)) == 3)
        a, b, pool = rows(app)
        assert " a " in a and "demo-mtp" in a and "80/140G" in a
        assert " b " in b and "demo-no-mtp" in b
        assert "pool all" in pool and "mixed (2)" in pool and "2/2 ready" in pool
        assert "gateway ready" in pool
        sample = make_host_sample(50, ["a", "b"])
        sample["engine"]["b"]["gen_throughput"] = 777.0
        src.feed({"push": "sample", "data": sample})
        await until(pilot, lambda: "777" in rows(app)[1])
        # The chart plots the total and keeps one series per slot.
        assert set(app.model.chart_slots()) == {"a", "b"}
        total = app.model.series["gen_throughput"][-1][1]
        assert total == sample["engine"]["a"]["gen_throughput"] + 777.0
        # b's swap: its row says so at once, and the chart marks it with b's name.
        src.feed(event("swap.step", slot="b", step="draining", to="demo-mtp", **{"from": "x"}))
        await until(pilot, lambda: "swap" in rows(app)[1])
        src.feed(event("swap.done", ts=sample["ts"], slot="b", to="demo-mtp", ok=True))
        await until(pilot, lambda: app.model.chart_marks() == [(sample["ts"], "b:demo-mtp")])


async def test_picking_a_slot_shows_its_details_logs_and_insight():
    src = ScriptedSource(make_host_status(2, ["demo-mtp", "demo-no-mtp"]))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        details = app.query_one("#slot-details")
        await until(pilot, lambda: "slot a" in str(details.render()))
        assert app.logbuf.tag_slots and app.logbuf.only_slot is None  # every slot's lines
        src.feed({"push": "log", "data": {"slot": "b", "launch_id": "", "lines": ["b says hi"]}})
        pane = app.query_one(SlotsPane)
        await pilot.press("o", "down")  # the operator moves onto b's row
        assert app.focused is pane
        await until(pilot, lambda: app.model.selected == "b")
        await until(pilot, lambda: "slot b" in str(details.render()))
        assert app.model.current.profile == "demo-no-mtp"
        await until(pilot, lambda: app.logbuf.only_slot == "b")
        assert all(line.slot == "b" for line in app.logbuf.visible())
        insight = app.query_one("#insight")
        await pilot.press("i")
        await until(pilot, lambda: "demo-no-mtp" in str(insight.render()))
        assert "demo-mtp\n" not in str(insight.render())
        pane.focus()
        await pilot.pause(0.1)
        pane.highlighted = 2  # the pool's row: every slot's logs again
        await until(pilot, lambda: app.model.selected is None and app.logbuf.only_slot is None)


async def test_a_focus_key_and_arrows_in_one_burst_move_the_slots_cursor():
    """`o` and two downs typed (or pasted) at once: the arrows go to the slots view the key
    focused, and the screen follows the row they reach (the focus used to land after them,
    so they moved the cursor of the widget focused before)."""
    src = ScriptedSource(make_host_status(3))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        profiles = app.query_one("#profile-list")
        profiles.focus()
        await pilot.pause(0.1)
        was = profiles.highlighted
        for key in ("o", "down", "down"):  # queued together, as a terminal's read delivers them
            app.post_message(events.Key(key, key if len(key) == 1 else None))
        await until(pilot, lambda: app.model.selected == "c")
        assert app.focused is app.query_one(SlotsPane)
        assert app.query_one(SlotsPane).highlighted == 2
        assert profiles.highlighted == was  # the old focus did not move


async def test_a_profile_key_asks_this_slot_or_the_whole_pool():
    src = ScriptedSource(make_host_status(2))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        app.query_one("#profile-list").focus()
        await pilot.press("1")  # demo-no-mtp
        await until(pilot, lambda: isinstance(app.screen, SlotOrPool))
        await pilot.press("p")
        await until(pilot, lambda: ops(src, "swap"))
        assert ops(src, "swap") == [{"profile": "demo-no-mtp", "pool": "all"}]
        assert ops(src, "preflight") == []  # the agent checks each slot as the roll reaches it
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, SlotOrPool))
        await pilot.press("s")  # slot a alone: checked first, then how to treat its requests
        await until(pilot, lambda: isinstance(app.screen, DrainChoice))
        assert ops(src, "preflight") == [{"profile": "demo-no-mtp", "slot": "a"}]
        await pilot.press("d")
        await until(pilot, lambda: len(ops(src, "swap")) == 2)
        assert ops(src, "swap")[1] == {"profile": "demo-no-mtp", "slot": "a", "drain": "wait"}
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, SlotOrPool))
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert len(ops(src, "swap")) == 2 and isinstance(
            app.screen.query_one(ProfilesPane), ProfilesPane
        )


async def test_eight_slots_fit_80x24():
    src = ScriptedSource(make_host_status(8))
    app = app_with(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(app, pilot)
        await until(pilot, lambda: len(rows(app)) == 9)
        pane = app.query_one(SlotsPane)
        await pilot.pause(0.2)
        assert pane.region.height == 10  # its title line, 8 slots and the pool: no scrolling
        assert not app.query_one("#memory").display or app.query_one("#memory").region.height == 0
        lower = app.query_one("#lower")
        assert lower.region.height >= 5 and lower.region.bottom <= 23
        assert [r.lstrip("▸ ").split()[0] for r in rows(app)[:8]] == slot_names(8)


async def test_a_rolling_swap_shows_on_the_pools_row_and_in_the_activity():
    src = ScriptedSource(make_host_status(2))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await until(pilot, lambda: len(rows(app)) == 3)
        roll = {"state": "rolling", "profile": "demo-no-mtp", "slot": "b", "done": ["a"]}
        src.status["pools"][0]["roll"] = roll  # what the agent's status says once it rolls
        src.feed(event("pool.roll", pool="all", step="begin", profile="demo-no-mtp"))
        await until(pilot, lambda: "rolling → demo-no-mtp slot b (1/2 done)" in rows(app)[2])
        stopped = dict(roll, state="stopped", error="preflight refused")
        src.status["pools"][0]["roll"] = stopped
        src.feed(
            event("pool.roll", pool="all", step="stopped", slot="b", error="preflight refused")
        )
        await until(pilot, lambda: "roll stopped at b: preflight refused" in rows(app)[2])
        texts = [item.text for item in app.model.activity]
        assert "pool all: rolling to demo-no-mtp" in texts
        assert "pool all: roll stopped at slot b: preflight refused" in texts


async def test_a_server_found_on_the_host_is_a_dimmed_row_that_A_attaches():
    """Issue 38: a server the user started by hand is listed beside the one slot, dimmed, and
    `A` on its row asks the agent to attach it."""
    status = status_with()
    url = "http://127.0.0.1:30000"
    status["unmanaged"] = [
        {"pid": 4242, "port": 30000, "url": url, "model": "Qwen/Qwen3-8B", "kind": "sglang"}
    ]
    src = ScriptedSource(status)
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await until(pilot, lambda: len(rows(app)) == 2)
        found = rows(app)[1]
        assert ":30000" in found and "Qwen/Qwen3-8B" in found and "not managed" in found
        assert "A attaches" in found
        await pilot.press("A")
        await until(pilot, lambda: {"url": url} in ops(src, "attach"))


async def test_a_sample_repaints_only_the_rows_it_changed():
    """Issue 39: a slot's row is drawn again only when its text changes (an OptionList drew
    every row again on any change of one)."""
    import copy

    src = ScriptedSource(make_host_status(3))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        first = make_host_sample(50, ["a", "b", "c"])
        src.feed({"push": "sample", "data": first})
        await until(pilot, lambda: app.model.series["gen_throughput"][-1][0] == first["ts"])
        await until(pilot, lambda: not app._flush_scheduled and not app._dirty)
        pane = app.query_one(SlotsPane)
        before = [pane.render_line(y) for y in range(4)]
        second = copy.deepcopy(first)
        second["ts"] = first["ts"] + 1
        second["engine"]["b"]["gen_throughput"] = 777.0
        src.feed({"push": "sample", "data": second})
        await until(pilot, lambda: "777" in rows(app)[1])
        after = [pane.render_line(y) for y in range(4)]
        assert after[0] is before[0] and after[2] is before[2]  # a and c: the same Strips
        assert after[1] is not before[1] and after[3] is not before[3]  # b and the pool's sum


@pytest.mark.parametrize(("size", "slot_rows"), [((120, 40), False), ((160, 60), True)])
async def test_eight_slots_fit_the_screen_without_scrolling(size, slot_rows):
    """Issue 39: with 8 slots at 120x40 the upper row overflowed (the memory pane's 16 GPU
    lines pushed the chart under the slots view, and the screen scrolled). Now the memory
    pane takes a line per GPU, the chart fits the rows left (a row per slot only where there
    is room for them and 3 rows of plot), and the whole chart, the slots view and the log's
    tabs are on screen."""
    status = make_host_status(8)
    app = app_with(ScriptedSource(status, [], status_follows_samples=True))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.query_one(SlotsPane).display and len(app.model.slots) == 8)
        await pilot.pause(0.3)
        memory, chart = app.query_one(MemoryPane), app.query_one(ThroughputPane)
        slots, tabs = app.query_one(SlotsPane), app.query_one("#lower")
        assert memory.compact and memory.outer_size.height == 8 + 1 + 2
        assert chart.region.bottom <= slots.region.y  # the chart's bottom border shows
        assert slots.region.bottom <= tabs.region.y < size[1] - 1
        assert app.screen.max_scroll_y == 0  # nothing below the screen
        drawn = [chart.render_line(y).text for y in range(chart.content_size.height)]
        assert any("└" in line and "now" in line for line in drawn)  # the time axis
        assert any(line.lstrip().startswith("b┤") for line in drawn) is slot_rows


async def test_the_quit_line_of_two_slots_gives_a_stop_that_works_and_names_the_sleepers():
    """Issue 51 item 11: with two slots the quit line said "stop with `sgltui stop`", which
    fails without --slot; the standby and the pool's gateway were not named although they run
    on; and a TUI that lost its agent named servers that may be gone."""
    status = make_host_status(2, ["demo-base", "demo-base"])
    status["slots"][0]["standbys"] = [{"profile": "demo-no-mtp", "state": "asleep", "pid": 77}]
    app = app_with(ScriptedSource(status))
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        note = app.exit_note() or ""
        pool = app.model.pools[0]
        assert f"stop with `sgltui stop --pool {pool.name}`" in note, note
        assert "stop with `sgltui stop`" not in note
        assert "demo-no-mtp kept warm on slot a" in note
        assert f"pool {pool.name}'s gateway pid {pool.gateway.pid}" in note
        assert "`sgltui agent stop --stop-servers` stops everything" in note
        app.model.connected = False  # the agent went (`sgltui demo --stop` ended it)
        gone = app.exit_note() or ""
        assert "demo-base" not in gone and "`sgltui status` says" in gone


async def test_one_slot_beside_a_found_server_has_no_stray_series_in_the_legend():
    """Issue 51 item 14: with one slot and a server found running beside it (the slots view
    shows, to list it), the throughput legend had a stray "0" series: slot 0's own tok/s
    again, as if there were several slots."""
    from tests.support.scripted import make_sample

    status = status_with()
    status["unmanaged"] = [{"pid": 99, "port": 31999, "url": "http://127.0.0.1:31999",
                            "model": "Qwen/Qwen3-8B", "kind": "sglang"}]  # fmt: skip
    src = ScriptedSource(status)
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        for t in (1.0, 2.0, 3.0):
            src.feed({"push": "sample", "data": make_sample(t)})
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 3)
        await until(pilot, lambda: not app._flush_scheduled and not app._dirty)
        pane = app.query_one(ThroughputPane)
        legend = "".join(seg.text for seg in pane.render_line(0))
        assert "tok/s" in legend and "■ 0 " not in legend and "total" not in legend, legend


async def test_a_row_is_one_strip_of_its_parts_and_reads_as_its_markup(monkeypatch):
    """A row changes every sample with busy slots: its line is one Strip of the styled head's
    segments, the figures and the padding (a Strip each for the figures, the join and the
    padding cost half the row's draw), and reads as its markup, padded to the width."""
    from sgltui.tui.widgets import slots as slots_module

    made: list[int] = []

    class Counted(slots_module.Strip):
        def __init__(self, *args, **kwargs):
            made.append(1)
            super().__init__(*args, **kwargs)

    app = app_with(ScriptedSource(make_host_status(2, ["demo-mtp", "demo-no-mtp"])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        pane = app.query_one(SlotsPane)
        await until(pilot, lambda: pane.row_count == 3)
        width = pane.scrollable_content_region.width
        monkeypatch.setattr(slots_module, "Strip", Counted)
        for index, option in enumerate(pane.options):
            markup = str(option.prompt)
            pane._strips.clear()
            made.clear()
            line = pane.render_line(index - pane.scroll_offset.y)
            assert len(made) == 1, markup  # (the slots' rows and the pool's, with a tail)
            plain = Content.from_markup(markup).plain
            assert line.text == plain.ljust(width) and line.cell_length == width


def test_a_sheet_is_kept_while_its_status_pick_and_hosts_read_the_same():
    """The slots view keeps its rows' heads and tails (a SlotSheet) between samples: a
    STATUS polled again (equal Structs made anew) keeps it; a slot, a pool, the pick, a host
    down or a server found that reads differently does not. Its rows are the rows the
    renderers draw, each sample's figures filled in."""
    import msgspec

    from sgltui import protocol
    from sgltui.tui.model import TuiModel
    from sgltui.tui.widgets.slotsheet import SlotSheet

    m = TuiModel()
    status = make_host_status(3)
    m.apply_status(status)
    slots, pools = m.slots, m.pools

    def figures(t: float) -> dict[str, views.SlotLine]:
        m.apply_push({"push": "sample", "data": make_host_sample(t, slot_names(3))})
        return {s.id: views.slot_line(s, m.engine(s.id), m.gpus_of(s.id)) for s in slots}

    sheet = SlotSheet(slots, pools, "a")
    assert sheet.fits(slots, pools, "a", None, ()) and sheet.picked == 0
    m.apply_status(status)  # polled again: new Structs, equal
    assert m.slots[0] is not slots[0] and sheet.fits(m.slots, m.pools, "a", {}, [])
    changed = [msgspec.structs.replace(slots[0], state="draining"), *slots[1:]]
    gateway = [msgspec.structs.replace(pools[0], gateway=protocol.PoolGateway(state="down"))]
    found = [protocol.Unmanaged(pid=7, kind="sglang")]
    assert not sheet.fits(changed, pools, "a", None, ())
    assert not sheet.fits(slots, gateway, "a", None, ())
    assert not sheet.fits(slots, pools, "b", None, ())
    assert not sheet.fits(slots, pools, "a", {"h": "unreachable since 14:02"}, ())
    assert not sheet.fits(slots, pools, "a", None, found)
    for t in (1.0, 9.0):
        figs = figures(t)
        want = [views.slot_row(s, figs[s.id], s.id == "a") for s in slots]
        want.append(views.pool_row(pools[0], slots, [figs[s.id] for s in slots]))
        assert [views.joined(row) for row in sheet.rows(figs)] == want
    assert "draining" in views.joined(SlotSheet(changed, pools, "a").rows(figs)[0])
    assert "gateway down" in SlotSheet(slots, gateway, "a").rows(figs)[-1][2]


def test_a_pools_figures_sum_its_slots_and_say_dash_for_none():
    from sgltui.tui.views import pool_figures_text

    gib = 1024**3
    busy = (" 100", 100.5, 4, 3, 80.0 * gib, 140.0 * gib)
    idle = (" 0", 0.0, 0, None, 10.0 * gib, None)
    none = ("", None, None, None, None, None)
    assert pool_figures_text([busy, idle, none]) == "     100    4/3  90/140G"
    assert pool_figures_text([none, none]) == "       -      -  -"
    assert pool_figures_text([busy, busy]) == "     201    8/6  160/280G"
    assert pool_figures_text([busy] * 12)[:8] == "   1.21k"  # (1206: thousands as k)


async def test_a_sample_draws_no_rows_head_or_tail_again(monkeypatch):
    """A sample changes the figures only: the rows' heads and tails (slot_head, the pool's
    head and gateway) are made for a STATUS or an event, not for every sample."""
    import copy

    made: list[str] = []
    for name in ("slot_head", "pool_head_tail"):
        real = getattr(views, name)
        monkeypatch.setattr(
            views, name, lambda *a, real=real, name=name, **k: made.append(name) or real(*a, **k)
        )
    src = ScriptedSource(make_host_status(3))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await until(pilot, lambda: len(rows(app)) == 4)
        sample = make_host_sample(50, ["a", "b", "c"])
        made.clear()
        for tok in (701.0, 702.0, 777.0):
            sample = copy.deepcopy(sample)
            sample["ts"] += 1
            sample["engine"]["b"]["gen_throughput"] = tok
            src.feed({"push": "sample", "data": sample})
            await until(pilot, lambda tok=tok: f"{tok:.0f}" in rows(app)[1])
        assert made == []
        src.feed(event("swap.step", slot="b", step="draining", to="demo-mtp", **{"from": "x"}))
        await until(pilot, lambda: "swap" in rows(app)[1])
        assert "slot_head" in made and "pool_head_tail" in made


async def test_a_pools_tail_is_placed_after_figures_of_any_width():
    """The pool's styled tail (its gateway) is kept per place: figures of another width move
    it, and each segment's cell offset (text selection reads them) is where it is drawn."""

    app = app_with(ScriptedSource(make_host_status(2, ["demo-mtp", "demo-no-mtp"])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        pane = app.query_one(SlotsPane)
        await until(pilot, lambda: pane.row_count == 3)
        head, plain, tail = pane._parts[-1]
        assert tail, "the pool's row has a gateway"
        width = pane.scrollable_content_region.width
        style = pane.get_visual_style("slots--row")
        # (A roll's tail ends in plain text: " slot b (1/2 done)".)
        rolling = "[b $warning]rolling → demo-mtp[/] slot b (1/2 done)"
        for figures, tail in (
            *((f, tail) for f in (plain, " 12345.6  " + plain, plain, " 7 ")),
            *((f, rolling) for f in (plain, " 7 ")),
        ):
            parts = (head, figures, tail)
            line = pane._row_strip(parts, width, (False, False, app.theme), style)
            assert line.text.rstrip() == Content.from_markup(views.joined(parts)).plain
            x = 0
            for seg in line:
                meta = seg.style.meta if seg.style is not None else {}
                if "offset" in meta and seg.text.strip():
                    assert meta["offset"][0] == x, (figures, seg.text)
                x += len(seg.text)


async def test_a_rows_figures_are_counted_in_cells_wide_or_not():
    """A row is padded to the width after its figures, counted in cells: figures of digits
    as their characters, wide or zero-width characters as cells (a row padded by characters
    would be too wide, or too narrow, for its Strip's length)."""
    from rich.cells import cell_len

    app = app_with(ScriptedSource(make_host_status(2, ["demo-mtp", "demo-no-mtp"])))
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        pane = app.query_one(SlotsPane)
        await until(pilot, lambda: pane.row_count == 3)
        width = pane.scrollable_content_region.width
        style = pane.get_visual_style("slots--row")
        for head, _, tail in (pane._parts[0], pane._parts[-1]):
            for figures in (" 141    4/3  80/140G", " 全角  4/3", " a\u200bb  4/3"):
                parts = (head, figures, tail)
                line = pane._row_strip(parts, width, (False, False, app.theme), style)
                assert line.cell_length == width and cell_len(line.text) == width, figures
                assert line.text.rstrip() == Content.from_markup(views.joined(parts)).plain


async def test_rows_changed_by_a_sample_are_repainted_as_one_region_per_run():
    """A busy pool's sample changes every row: they are refreshed as one region (a region
    per row was Textual's work per row, twice); rows a sample leaves alone are in none."""
    import copy

    from textual.geometry import Region

    from sgltui.tui.widgets.strips import row_spans

    assert row_spans([]) == [] and row_spans([0, 1, 2, 5, 7, 8]) == [(0, 3), (5, 1), (7, 2)]
    src = ScriptedSource(make_host_status(3))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        first = make_host_sample(50, ["a", "b", "c"])
        src.feed({"push": "sample", "data": first})
        await until(pilot, lambda: app.model.series["gen_throughput"][-1][0] == first["ts"])
        await until(pilot, lambda: not app._flush_scheduled and not app._dirty)
        pane = app.query_one(SlotsPane)
        refreshed: list[tuple[Region, ...]] = []
        refresh = pane.refresh

        def counted(*regions, **kwargs):
            refreshed.append(regions)
            return refresh(*regions, **kwargs)

        pane.refresh = counted  # type: ignore[method-assign]
        width = pane.scrollable_content_region.width
        every = copy.deepcopy(first)
        every["ts"] = first["ts"] + 1
        for n, sid in enumerate(("a", "b", "c")):
            every["engine"][sid]["gen_throughput"] = 701.0 + n
        src.feed({"push": "sample", "data": every})
        await until(pilot, lambda: "703" in rows(app)[2])
        assert refreshed == [(Region(0, 0, width, 4),)]  # a, b, c and the pool's sum
        refreshed.clear()
        one = copy.deepcopy(every)
        one["ts"] = every["ts"] + 1
        one["engine"]["b"]["gen_throughput"] = 777.0
        src.feed({"push": "sample", "data": one})
        await until(pilot, lambda: "777" in rows(app)[1])
        assert refreshed == [(Region(0, 1, width, 1), Region(0, 3, width, 1))]  # b, the pool


async def test_the_slots_views_title_follows_a_short_screen():
    """The column names in the border are set when the screen turns short or tall (not
    escaped again with every sample): a resize across 32 lines changes them at once."""
    from textual.markup import escape

    app = app_with(ScriptedSource(make_host_status(2)))
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        pane = app.query_one(SlotsPane)
        tall, short = escape(views.SLOT_COLUMNS[2:]), escape(views.SLOT_COLUMNS[1:])
        await until(pilot, lambda: pane.border_title == tall)
        await pilot.resize_terminal(120, 30)
        await until(pilot, lambda: pane.border_title == short)
        await pilot.resize_terminal(120, 40)
        await until(pilot, lambda: pane.border_title == tall)


def test_a_throughput_reads_as_sig3_writes_it():
    """The slots view formats a throughput's usual ranges (0.001 to 999k) at once, not by
    units.sig3's eight calls: the same text, at the ranges' edges and between them."""
    import math
    import random

    from sgltui.core import units

    rng = random.Random(49)
    values = [0.001, 0.000999, 0.9995, 9.995, 99.95, 999.49, 999.5, 1245.0, 1235.0, 99_950.0]
    values += [999_499.9, 999_500.0, 0.0, -3.0, 7, 512, math.nan, math.inf, 12_345_678.0]
    for exp in range(-3, 6):  # every 4-digit mantissa, and the halves between (ties round)
        values += [m * 10.0 ** (exp - 3) for m in range(1000, 10000, 7)]
        values += [(m + 0.5) * 10.0 ** (exp - 3) for m in range(1000, 10000, 7)]
    values += [10 ** rng.uniform(-3.5, 6.5) for _ in range(20_000)]
    for value in values:
        assert views._sig3(value) == units.sig3(value), value
    assert views._sig3(None) == "-"


def test_a_slots_line_says_its_figures_and_the_numbers_a_pool_sums():
    """A slot's row of figures and its numbers, made in one go from the sample: throughput,
    running/queued while it serves ('-' otherwise; 0/0 with no reading yet), its server's
    memory on its GPUs (placed: those GPUs; not placed: where its server is seen)."""
    from sgltui import protocol

    gib = 2**30
    gpus = [
        protocol.GpuView(index=0, total_bytes=140 * gib, server_bytes={"a": 80 * gib}),
        protocol.GpuView(index=1, total_bytes=140 * gib, server_bytes={"a": 70 * gib}),
    ]
    reading = {"gen_throughput": 141.2, "num_running_reqs": 4, "num_queue_reqs": 3}
    ready = protocol.SlotStatus(id="a", state="ready", gpus=[0, 1])
    assert views.slot_line(ready, reading, gpus) == (
        "     141    4/3  150/280G",
        141.2,
        4,
        3,
        150.0 * gib,
        280.0 * gib,
    )
    assert views.slot_line(ready, None, gpus)[:4] == ("       -    0/0  150/280G", None, 0, 0)
    for odd in (True, "141", None):  # not a number: no throughput
        assert views.slot_line(ready, {**reading, "gen_throughput": odd}, gpus)[1] is None
    assert views.slot_line(ready, {**reading, "gen_throughput": 1500}, gpus)[0][:8] == "   1.50k"
    unplaced = protocol.SlotStatus(id="a", state="draining", gpus=[])
    assert views.slot_line(unplaced, reading, gpus[1:])[0] == "     141    4/3  70/140G"
    stopped = protocol.SlotStatus(id="b", state="stopped", gpus=[])
    assert views.slot_line(stopped, reading, gpus) == (
        "       -      -  -",
        None,
        None,
        None,
        None,
        None,
    )


async def test_a_sample_converts_no_slot_the_models_slots_are_kept_until_they_change(monkeypatch):
    """The model converts its slots (each a STATUS slot) once per slots dict, not at each read:
    samples convert none (the slots view and the memory pane read `slots` with each one); an
    event or a STATUS that changes a slot makes the model read them again, and the slots
    view's row says so."""
    import copy

    from sgltui.tui import typed

    converted: list[str] = []
    real = typed.as_status_slot

    def as_status_slot(view):
        converted.append(view.id)
        return real(view)

    monkeypatch.setattr(typed, "as_status_slot", as_status_slot)
    src = ScriptedSource(make_host_status(3))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await until(pilot, lambda: len(rows(app)) == 4)
        assert app.model.slots is app.model.slots  # (one read kept)
        kept = app.model.slots
        converted.clear()
        sample = make_host_sample(50, ["a", "b", "c"])
        for tok in (701.0, 702.0):
            sample = copy.deepcopy(sample)
            sample["ts"] += 1
            sample["engine"]["b"]["gen_throughput"] = tok
            src.feed({"push": "sample", "data": sample})
            await until(pilot, lambda tok=tok: f"{tok:.0f}" in rows(app)[1])
        assert converted == [] and app.model.slots is kept
        src.feed(event("swap.step", slot="b", step="draining", to="demo-mtp", **{"from": "x"}))
        await until(pilot, lambda: "swap" in rows(app)[1])
        assert "b" in converted and app.model.slots is not kept
        assert app.model.slots[1] != kept[1]  # (the swap: read again)
        converted.clear()
        src.status["slots"][2]["state"] = "stopped"  # a STATUS that changes a slot
        app.refresh_status_soon()
        await until(pilot, lambda: "stopped" in rows(app)[2])
        assert converted and app.model.slots[2].state == "stopped"


async def test_a_slots_memory_is_made_again_only_when_its_gpus_bytes_change(monkeypatch):
    """Each slot's GPU memory is made once per reading of the GPUs' bytes (and per list of
    slots): samples whose GPUs differ only in utilization make none and still show each
    sample's throughput; a server's bytes that change show on its row at once."""
    import copy

    made: list[str] = []
    real = views.slot_mem

    def slot_mem(slot, gpus):
        made.append(slot.id)
        return real(slot, gpus)

    monkeypatch.setattr(views, "slot_mem", slot_mem)
    src = ScriptedSource(make_host_status(3))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await until(pilot, lambda: len(rows(app)) == 4)
        sample = make_host_sample(50, ["a", "b", "c"])
        src.feed({"push": "sample", "data": sample})
        await until(pilot, lambda: "76/140G" in rows(app)[1], show=lambda: rows(app))
        made.clear()
        for tok, util in ((701.0, 50.0), (702.0, 90.0)):
            sample = copy.deepcopy(sample)
            sample["ts"] += 1
            sample["engine"]["b"]["gen_throughput"] = tok
            for g in sample["gpus"]:
                g["utilization_pct"] = util
            src.feed({"push": "sample", "data": sample})
            await until(pilot, lambda tok=tok: f"{tok:.0f}" in rows(app)[1])
        assert made == []
        sample = copy.deepcopy(sample)
        sample["ts"] += 1
        sample["gpus"][1]["server_bytes"]["b"] = 60 * 2**30
        src.feed({"push": "sample", "data": sample})
        await until(pilot, lambda: "60/140G" in rows(app)[1], show=lambda: rows(app))
        assert "80/140G" in rows(app)[0] and "72/140G" in rows(app)[2], rows(app)
        assert "212/421G" in rows(app)[3], rows(app)  # (the pool's sum: 80 + 60 + 72)


async def test_a_busy_sample_costs_the_slots_view_a_bounded_number_of_calls():
    """Issue 49's budget, counted: with 8 busy slots a sample's draw of the slots view (every
    slot's figures, the pool's sum, the sheet's rows, the one refresh of the changed rows)
    made ~375 calls before the twelfth round's second part (a figures object, its text and
    sig3's eight calls per slot, the slots converted again, the pane's geometry asked of
    Textual), 187 after it, 131 since the thirteenth (each slot's memory kept while its GPUs'
    bytes are the same, the slots' lines in one function, the highlight read from its
    watcher's note, the row count said by `show`); about 75 of them are Textual's refresh.
    A draw after a STATUS the app polled for (its slots converted again) is not counted."""
    import sys

    from sgltui.tui import model as M
    from sgltui.tui import panes

    src = ScriptedSource(make_host_status(8))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        pane = app.query_one(SlotsPane)
        await until(pilot, lambda: pane.row_count == 9)
        names = slot_names(8)
        counts: list[int] = []
        drawn_from = None  # the model's slots at the last draw
        for t in range(60, 70):
            await pilot.pause(0.1)  # (the app's own flush done: the draw below is the only one)
            # A STATUS the app polled for since the last draw has the draw convert the slots
            # and make their memory again (once a STATUS, not a sample's cost): not counted.
            status_came = app.model.state.slots is not drawn_from
            app.model.apply_push({"push": "sample", "data": make_host_sample(float(t), names)})
            calls = [0]

            def count(frame, event, arg, calls=calls):
                calls[0] += event in ("call", "c_call")

            sys.setprofile(count)
            try:
                panes._draw_slots(app, pane, {M.MEMORY, M.CHART})
            finally:
                sys.setprofile(None)
            drawn_from = app.model.state.slots
            tok = app.model.telemetry.engine[names[0]]["gen_throughput"]
            assert views._sig3(tok) in pane._parts[0][1]  # the figures are this sample's
            if not status_came:
                counts.append(calls[0])
            if len(counts) == 3:
                break
        assert len(counts) == 3, counts
        assert max(counts) <= 134, counts  # (132; 138 with the highlight read as a reactive)


async def test_a_scrolled_slots_views_changed_rows_are_repainted_where_they_are_drawn():
    """A sample's changed rows are placed where the last frame drew them (not asked of
    Textual each sample): scrolled down, a slot's new figures show on its row on screen."""
    import copy

    names = slot_names(14)  # (more rows than the view's 12: it scrolls)
    src = ScriptedSource(make_host_status(14))
    app = app_with(src)
    async with app.run_test(size=(120, 50)) as pilot:
        await ready(app, pilot)
        pane = app.query_one(SlotsPane)
        await until(pilot, lambda: pane.row_count == 15)
        await pilot.press("o", "end")
        await until(pilot, lambda: pane.scroll_offset.y > 0)

        def on_screen(figure: str) -> bool:
            """The last slot's row as the screen shows it (the compositor's lines)."""
            svg = app.export_screenshot().replace("&#160;", " ")
            return any(names[-1] in line and figure in line for line in svg.splitlines())

        sample = make_host_sample(50, names)
        for tok in (701.0, 777.0):
            sample = copy.deepcopy(sample)
            sample["ts"] += 1
            sample["engine"][names[-1]]["gen_throughput"] = tok
            src.feed({"push": "sample", "data": sample})
            await until(pilot, lambda tok=tok: f"{tok:.0f}" in rows(app)[13])
            await until(pilot, lambda tok=tok: on_screen(f"{tok:.0f}"))
