"""The Profiles pane (issue 15): key, validity mark, name, launcher, description cut to the pane
with an ellipsis; the highlighted profile's first error or host-pool shortfall on the detail
line; the whole row as a tooltip under the mouse."""

from __future__ import annotations

from textual.widgets import OptionList

from sgltui.tui import typed, views
from sgltui.tui.widgets.profiles import ProfileList
from tests.support.scripted import ScriptedSource

from .helpers import app_with, status_with, until
from .test_views import plain

LONG = "plain decoding, many requests at once, the description that no 80-column pane can hold"
HUGE = {
    "host_pool_gib": 240.0,
    "host_pool_problem": "host pool 240 GiB > 187 GiB free RAM",
    "host_pool_how": "hicache-ratio 2 x device pool 120.0 GiB",
}
ERROR = 'p.toml:4: mem-fraction-static: must be a number, got "lots"; write a number'


def profiles():
    return [typed.profile(p) for p in rows()]


def rows():
    return [
        {"name": "fast", "key": "1", "launcher": "sim", "description": LONG, "valid": True},
        {"name": "gpu", "key": "2", "launcher": "sglang", "description": "real one", "valid": True},
        {"name": "big", "key": "3", "launcher": "sim", "valid": True, **HUGE},
        {"name": "bad", "key": "4", "launcher": "sim", "valid": False, "problem": ERROR},
    ]


def test_row_says_key_mark_name_launcher_and_description():
    rows = {p.name: plain(views.profile_option(p, [])) for p in profiles()}
    assert rows["fast"] == f"1 ✓ fast  sim  {LONG}"
    assert rows["gpu"] == "2 ✓ gpu  real  real one"
    assert rows["big"].startswith("3 ⚠ big  sim") and rows["bad"].startswith("4 ✗ bad  sim")


def test_detail_line_names_the_problem_only_when_there_is_one():
    by = {p.name: p for p in profiles()}
    assert views.profile_detail(by["fast"]) == ""
    assert plain(views.profile_detail(by["bad"])) == f"✗ {ERROR}"
    assert plain(views.profile_detail(by["big"])) == (
        "⚠ refused: host pool 240 GiB > 187 GiB free RAM (hicache-ratio 2 x device pool 120.0 GiB)"
    )
    tip = views.profile_tooltip(by["fast"])
    assert tip.splitlines() == ["fast (sim, key 1)", LONG]
    assert "host pool 240 GiB > 187 GiB free RAM" in views.profile_tooltip(by["big"])


def _status():
    st = status_with(profile="fast")
    st["profiles"] = rows()
    return st


async def test_pane_cuts_rows_shows_the_problem_and_the_whole_row_on_hover():
    app = app_with(ScriptedSource(_status()))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        box = app.query_one("#profile-list", ProfileList)
        await until(pilot, lambda: len(box.options) == 4)

        def first_line() -> str:
            return "".join(seg.text for seg in box.render_line(0))

        # (a loaded machine can ask before the list is laid out: a blank line)
        await until(pilot, lambda: first_line().strip() != "", show=first_line)
        width = box.size.width
        first = first_line()
        assert first.rstrip().endswith("…") and len(first.rstrip()) <= width, first
        assert box.get_content_height(box.size, box.size, width) == 4  # one line per profile
        detail = app.query_one("#profile-detail")
        assert not detail.display  # highlighted "fast" (slot 0 runs it): nothing wrong
        app.query_one("#profile-list", OptionList).highlighted = 3
        await until(pilot, lambda: detail.display)
        assert "mem-fraction-static: must be a number" in str(detail.render())
        app.query_one("#profile-list", OptionList).highlighted = 2
        await until(pilot, lambda: "240 GiB > 187 GiB" in str(detail.render()))
        await pilot.hover("#profile-list", offset=(5, 0))
        await until(pilot, lambda: box.tooltip is not None)
        assert LONG in str(box.tooltip)


def test_detail_line_keeps_the_file_name_not_its_folder():
    row = typed.profile(
        {"name": "t", "valid": False, "problem": "/tmp/x/y/t.toml:7: port: takes a number"}
    )
    assert plain(views.profile_detail(row)) == "✗ t.toml:7: port: takes a number"


async def test_a_list_one_row_too_long_gets_a_thin_scrollbar_not_textuals_two_columns():
    """Six profiles in a five-row pane (80x24): a one-column bar in the pane's last column,
    the rows keep the rest of the width (Textual's default bar is two columns of ▄▄)."""
    st = _status()
    st["profiles"] += [
        {"name": f"extra-{k}", "key": k, "launcher": "sim", "description": "x", "valid": True}
        for k in ("5", "6")
    ]
    app = app_with(ScriptedSource(st))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        box = app.query_one("#profile-list", ProfileList)
        await until(pilot, lambda: len(box.options) == 6)
        await pilot.pause(0.1)
        assert box.max_scroll_y >= 1 and box.show_vertical_scrollbar
        assert box.scrollbar_size_vertical == 1
        assert box.scrollable_content_region.width == box.size.width - 1
        assert box.max_scroll_x == 0  # rows are cut with an ellipsis, never scrolled sideways


async def test_shipped_profiles_rows_show_the_words_that_tell_them_apart():
    """Issue 51 item 14: every demo profile's row read "Simulated GPU, sped up 10x: plain deco…"
    (the description was cut before the words that tell them apart). What a 120-column screen
    shows of each shipped profile's description differs from the others'."""
    import os
    from pathlib import Path

    from textual.content import Content
    from textual.widgets import OptionList

    from sgltui.core.profiles import scan_profiles
    from tests.support.scripted import ScriptedSource, make_status

    from .helpers import app_with, until

    root = Path(__file__).resolve().parents[2] / "profiles"
    found = scan_profiles([root, root / "demo"])
    rows = []
    for name in found.names():
        p = found.resolve(name)
        rows.append({"name": p.name, "key": p.key, "description": p.description,
                     "launcher": p.launcher, "valid": True})  # fmt: skip
    status = make_status([])
    status["profiles"] = rows
    app = app_with(ScriptedSource(status))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected and app.first_status.is_set())
        listing = app.query_one("#profile-list", OptionList)
        await until(pilot, lambda: listing.option_count == len(rows))
        width = listing.scrollable_content_region.width
        seen = {}
        for i in range(listing.option_count):
            option = listing.get_option_at_index(i)
            plain = Content.from_markup(str(option.prompt)).plain
            desc = found.resolve(option.id).description
            shown = plain[: width - 1]  # the row as drawn, cut with an ellipsis
            start = plain.index(desc[:8])
            seen[option.id] = shown[start:]
        full = {name: found.resolve(name).description for name in seen}
        for name, shown in seen.items():
            # what it shares with the most alike of the others of its launcher (the row says
            # sim or real before it), then two words' worth more
            kind = found.resolve(name).launcher
            shared = max(
                len(os.path.commonprefix([full[name], full[o]]))
                for o in full
                if o != name and found.resolve(o).launcher == kind
            )
            visible = len(shown.rstrip("…"))
            assert visible >= shared + 10, (name, shown, full[name][: shared + 10])
