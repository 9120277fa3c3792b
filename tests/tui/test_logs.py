"""The log pane as people expect from k9s/lazydocker/Toolong (issue 15): access and per-batch
lines folded by default (z shows them), wrap toggle, search from the tail with n/N and a
match counter, "no matches", follow that pauses on scroll and says so."""

from __future__ import annotations

from sgltui.tui.widgets.logs import LogPane, LogView

from .helpers import ScriptedSource, app_with, status_with, until

SIZE = (120, 40)
ACCESS = 'INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
BATCH = "[2026-12-02 15:41:00] Decode batch, #running-req: 4, #token: 8000, token usage: 0.30"


async def opened(app, pilot):
    await until(pilot, lambda: app.model.connected and app.first_status.is_set())
    await pilot.pause(0.15)


def label(app) -> str:
    return str(app.query_one("#lower").get_tab("tab-logs").label)


async def test_access_and_batch_lines_are_folded_until_z():
    # As the simulator and SGLang print them: after a "[time] " prefix (seen in tmux).
    prefixed = f"[2026-12-03 13:07:38] {ACCESS}"
    logs = ["server started", ACCESS, BATCH, "a warning: fewer than asked", prefixed]
    app = app_with(ScriptedSource(status_with(), logs=logs))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        assert len(view.lines) == 2
        assert "access/batch hidden (z)" in label(app)
        await pilot.press("l", "z")
        await until(pilot, lambda: len(view.lines) == 5)
        assert "hidden" not in label(app)
        await pilot.press("z")
        await until(pilot, lambda: len(view.lines) == 2)


async def test_search_starts_at_the_tail_counts_matches_and_n_goes_older():
    logs = [f"row {i}" + (" needle" if i % 50 == 0 else "") for i in range(300)]
    app = app_with(ScriptedSource(status_with(), logs=logs))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        pane, view = app.query_one(LogPane), app.query_one(LogView)
        await pilot.press("ctrl+f", *"needle", "enter")
        # Six matches (rows 0, 50, ... 250); the first jump is the newest one.
        await until(pilot, lambda: "'needle' 6/6" in label(app), show=lambda: label(app))
        height = view.scrollable_content_region.height
        assert int(view.scroll_y) <= 250 < int(view.scroll_y) + height
        assert not pane.following and "paused" in label(app)
        await pilot.press("n")  # older
        await until(pilot, lambda: "'needle' 5/6" in label(app), show=lambda: label(app))
        assert int(view.scroll_y) <= 200 < int(view.scroll_y) + height
        await pilot.press("N", "N")  # newer, then wraps to the oldest
        await until(pilot, lambda: "'needle' 1/6" in label(app), show=lambda: label(app))
        await pilot.press("escape")  # in the log: clears the search (no stale label)
        await until(pilot, lambda: "needle" not in label(app), show=lambda: label(app))


async def test_search_without_a_match_says_so():
    app = app_with(ScriptedSource(status_with(), logs=["alpha", "beta"]))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        await pilot.press("ctrl+f", *"gamma", "enter")
        await until(pilot, lambda: "'gamma': no matches" in label(app), show=lambda: label(app))
        await pilot.press("n")
        assert "no matches" in label(app)


async def test_wrap_shows_a_long_line_on_several_rows():
    long = "x" * 300
    app = app_with(ScriptedSource(status_with(), logs=["short", long]))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        assert view.virtual_size.height == 2
        await pilot.press("l", "w")
        width = view.scrollable_content_region.width - 1  # the scrollbar column
        await until(
            pilot,
            lambda: view.virtual_size.height == 1 + -(-300 // width),
            show=lambda: (view.virtual_size, width),
        )
        assert "wrap" in label(app)
        await pilot.press("w")
        await until(pilot, lambda: view.virtual_size.height == 2)


async def test_follow_pauses_on_a_scroll_up_and_new_lines_keep_the_view():
    src = ScriptedSource(status_with(), logs=[f"line {i}" for i in range(200)])
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        await pilot.press("l")
        await until(pilot, lambda: view.scroll_y == view.max_scroll_y > 0)
        await pilot.press("pageup")
        await until(pilot, lambda: "paused (G: follow)" in label(app), show=lambda: label(app))
        top = view.scroll_y
        src.feed({"push": "log", "data": {"slot": "0", "lines": ["late line"] * 5}})
        await until(pilot, lambda: len(view.lines) == 205)
        assert view.scroll_y == top
        await pilot.press("G")
        await until(pilot, lambda: view.scroll_y == view.max_scroll_y and "following" in label(app))


async def test_following_moves_the_view_to_the_new_end_and_a_scroll_starts_from_there():
    """Issue 49: a following view moves to the end without Textual's scroll_to (the scroll
    position set, the view repainted). The new lines are the bottom rows, and a scroll up
    starts from where the view is (Textual's scroll target moved with it: a stale one
    jumped back to where the view was before the lines came)."""
    src = ScriptedSource(status_with(), logs=[f"line {i}" for i in range(200)])
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        await pilot.press("l")
        await until(pilot, lambda: view.scroll_y == view.max_scroll_y > 0)
        top = view.scroll_y
        src.feed({"push": "log", "data": {"slot": "0", "lines": [f"new-{i}" for i in range(5)]}})
        await until(pilot, lambda: len(view.lines) == 205)
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y == top + 5
        assert view.scroll_target_y == view.scroll_y
        bottom = view.scrollable_content_region.height - 1
        assert first_row_at(view, bottom).endswith("new-4")
        assert "new-4" in app.export_screenshot()  # (repainted: not the rows cached before)
        view.scroll_up(animate=False)
        await pilot.pause()
        assert view.scroll_y == top + 4 and not view.auto_scroll


def first_row_at(view: LogView, y: int) -> str:
    return "".join(seg.text for seg in view.render_line(y)).rstrip()


async def test_the_buffer_stays_bounded_and_the_view_follows_it():
    from sgltui.tui.config import TuiConfig

    src = ScriptedSource(status_with(), logs=[])
    app = app_with(src, config=TuiConfig(log_max_lines=100))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        for k in range(5):
            src.feed(
                {"push": "log", "data": {"slot": "0", "lines": [f"b{k} {i}" for i in range(60)]}}
            )
        await until(pilot, lambda: view.lines and len(view.seqs) == 100 and view.seqs[-1] == 300)
        assert view.virtual_size.height == 100 and view.scroll_y == view.max_scroll_y


def first_row(view: LogView) -> str:
    return "".join(seg.text for seg in view.render_line(0)).rstrip()


async def test_a_tail_of_only_folded_lines_says_how_many_are_hidden_and_which_key_shows_them():
    """A re-attach under load: the last lines are all access/batch lines, folded away. The
    pane says so (with the key as remapped), instead of looking as if nothing was logged."""
    from sgltui.tui.config import TuiConfig

    logs = [ACCESS, BATCH, f"[2026-12-03 13:07:38] {ACCESS}"]
    app = app_with(
        ScriptedSource(status_with(), logs=logs), config=TuiConfig(keymap={"logs.fold": "v"})
    )
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        assert view.lines == []
        await until(pilot, lambda: first_row(view) != "", show=lambda: first_row(view))
        assert first_row(view) == "3 access/batch lines hidden (v shows them)"
        assert "access/batch hidden (v)" in label(app)
        app.source.feed({"push": "log", "data": {"slot": "0", "lines": [BATCH]}})
        await until(pilot, lambda: first_row(view).startswith("4 "), show=lambda: first_row(view))
        await pilot.press("l", "v")
        await until(pilot, lambda: len(view.lines) == 4)
        assert first_row(view).startswith("INFO:")  # the lines themselves, no placeholder


async def test_a_filter_that_matches_nothing_says_so_and_esc_clears_it():
    app = app_with(ScriptedSource(status_with(), logs=["alpha", "beta", ACCESS]))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        await pilot.press("slash", *"gamma", "enter")
        await until(pilot, lambda: "no line" in first_row(view), show=lambda: first_row(view))
        assert first_row(view) == "no line matches 'gamma' (esc clears)"
        await pilot.press("escape")  # in the log view, the input closed: clears the filter
        await until(pilot, lambda: len(view.lines) == 2, show=lambda: label(app))
        assert "filter" not in label(app)
        await pilot.press("e")  # warnings and errors only: there are none
        await until(pilot, lambda: first_row(view).startswith("no "), show=lambda: first_row(view))
        assert first_row(view) == "no warnings or errors in the last 3 lines (e: next level)"
        await pilot.press("e", "e")  # errors only, then every level again
        await until(pilot, lambda: len(view.lines) == 2, show=lambda: label(app))
        await pilot.press("slash", *"POST", "enter")  # only in a folded access line
        await until(pilot, lambda: "POST" in first_row(view), show=lambda: first_row(view))
        assert first_row(view) == (
            "no shown line matches 'POST'; 1 access/batch line does (z shows them, esc clears)"
        )


async def test_reopened_on_a_busy_server_the_pane_shows_its_last_lines_that_are_not_access():
    """Issue 37: a re-opened TUI read only '248 access/batch lines hidden (z shows them)': the
    last 200 lines were all access lines. It reads further back for the server's own lines."""
    start = [f"[2026-12-03 13:00:{i:02d}] startup line {i}" for i in range(10)]
    logs = start + ["The server is fired up and ready to roll!"] + [ACCESS] * 600

    def tail(op, args, src):  # the agent's `logs`: the file's last `lines` lines
        if op == "logs":
            return {"lines": logs[-args["lines"] :], "path": "/tmp/x.log", "launch_id": "L1"}
        return None

    app = app_with(ScriptedSource(status_with(), logs=logs, on_call=tail))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        await until(pilot, lambda: len(view.lines) >= 11, show=lambda: view.lines)
        shown = "\n".join(str(x) for x in view.lines)
        assert "fired up and ready to roll" in shown and "startup line 0" in shown
        texts = [line.text for line in app.logbuf.lines]
        assert len(texts) == len(set(texts[:11])) + texts.count(ACCESS)  # each once


async def test_lines_pushed_while_the_tail_was_read_show_once():
    """Issue 37: once the first launch's lines showed twice (the file has them once). The agent
    pushes a launch's lines from the subscription on, and the tail read on connecting has the
    same ones: pushed lines the tail already has are not added again."""
    logs = [f"[2026-12-03 13:00:{i:02d}] startup line {i}" for i in range(8)]
    src = ScriptedSource(status_with(), logs=logs)
    # Queued while the app reads the tail: the last three lines again, then two new ones.
    src.feed({"push": "log", "data": {"slot": "0", "lines": logs[5:] + ["new 1", "new 2"]}})
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        await until(pilot, lambda: any(x.text == "new 2" for x in app.logbuf.lines))
        texts = [x.text for x in app.logbuf.lines]
        assert texts == logs + ["new 1", "new 2"], texts
        src.feed({"push": "log", "data": {"slot": "0", "lines": [logs[0]]}})  # later: new
        await until(pilot, lambda: len(app.logbuf.lines) == len(texts) + 1)


async def test_a_folded_line_draws_nothing_until_z_shows_it():
    """Issue 39: an idle server's access lines (the agent's polls, a gateway's health checks)
    change nothing on screen while folded: no draw of the app for them. z still shows them."""
    app = app_with(ScriptedSource(status_with(), logs=["server started"]))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        await until(pilot, lambda: not app._flush_scheduled and not app._dirty)
        draws = []
        real = app._draw
        app._draw = lambda dirty, hidden=(): (draws.append(set(dirty)), real(dirty, hidden))  # type: ignore[method-assign]
        for _ in range(3):
            app.source.feed(
                {"push": "log", "data": {"slot": "0", "launch_id": "", "lines": [ACCESS]}}
            )
        await pilot.pause(0.4)
        assert draws == [] and app.logfeed.new_lines == []
        assert sum(1 for line in app.logbuf.lines if line.text == ACCESS) == 3
        app.source.feed({"push": "log", "data": {"slot": "0", "launch_id": "", "lines": ["hi"]}})
        await until(pilot, lambda: any("logs" in d for d in draws))
        view = app.query_one(LogView)
        shown = len(view.lines)
        await pilot.press("l", "z")  # the fold off: the three access lines are there
        await until(pilot, lambda: len(view.lines) == shown + 3)


async def test_a_hidden_log_tab_draws_its_new_lines_when_shown():
    """Issue 49 (costs that follow what is shown): lines arriving while another tab is shown
    are kept, not appended and scrolled for nobody; showing the Logs tab draws them, and more
    than the buffer holds draws the buffer afresh."""
    from sgltui.tui.config import TuiConfig

    src = ScriptedSource(status_with(), logs=[f"line {i}" for i in range(10)])
    app = app_with(src, config=TuiConfig(log_max_lines=100))
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        await until(pilot, lambda: len(view.lines) == 10)
        app.show_tab("bench")
        await pilot.pause(0.1)
        src.feed({"push": "log", "data": {"slot": "0", "lines": ["late line"] * 5}})
        await until(pilot, lambda: len(app.logfeed.new_lines) == 5)
        await pilot.pause(0.2)
        assert len(view.lines) == 10  # not drawn while hidden
        app.show_tab("logs")
        await until(pilot, lambda: len(view.lines) == 15)
        app.show_tab("bench")
        await pilot.pause(0.1)
        src.feed({"push": "log", "data": {"slot": "0", "lines": [f"n {i}" for i in range(150)]}})
        await until(pilot, lambda: app.logfeed.redraw)
        assert not app.logfeed.new_lines  # (bounded: the buffer is drawn afresh instead)
        app.show_tab("logs")
        await until(pilot, lambda: len(view.seqs) == 100 and view.seqs[-1] == 165)


async def test_rows_drawn_from_the_cache_are_the_rows_drawn_afresh_as_the_knob_moves():
    """Issue 49: a row is cached with its scrollbar cell and its text apart (a row leaving the
    knob needs only its cell again), the cell appended to the row's own Strip. Lines arriving
    one by one while following move the knob down and shrink it; after each, every row drawn
    from the caches is the row drawn with none (text, styles, cells, the scrollbar's column).
    A row's text cached with its cell (the knob's cell left on a row below it), or a cell
    counted wrong, fails."""
    from textual.cache import LRUCache
    from textual.geometry import Region

    src = ScriptedSource(status_with(), logs=[f"line {i}" for i in range(40)])
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        await until(pilot, lambda: len(view.lines) == 40 and view.scroll_y == view.max_scroll_y)

        def rows() -> list[tuple[int, list[tuple[str, object]]]]:
            view.refresh()  # (Textual keeps the lines it drew: drawn again through render_line)
            region = view.scrollable_content_region
            strips = view.render_lines(Region(0, 0, region.width, region.height))
            return [(s.cell_length, [(seg.text, seg.style) for seg in s]) for s in strips]

        knobs = set()
        for k in range(30):
            src.feed({"push": "log", "data": {"slot": "0", "lines": [f"new {k}"]}})
            await until(pilot, lambda k=k: len(view.lines) == 41 + k)
            await pilot.pause()
            cached = rows()
            knobs.add(tuple(text == "█" for _n, segs in cached for text, _ in segs[-1:]))
            kept = view._cache, view._texts  # drawn with none, the caches kept
            view._cache, view._texts = LRUCache(16), LRUCache(16)
            fresh = rows()
            view._cache, view._texts = kept
            assert cached == fresh, k
            assert cached[-1][1][0][0].startswith(f"new {k}")
        assert len(knobs) >= 3  # (the knob shrank: rows left it)


async def test_the_pane_finds_its_view_once_and_a_shown_line_marks_without_the_pane():
    """Issue 49: the log pane keeps its view (a DOM query per append before), and a tick's
    lines with one the tab shows are marked for the next draw without looking the pane up
    (its lookup walks up the DOM to check it is attached); lines it folds still ask it."""
    src = ScriptedSource(status_with(), logs=["server started"])
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        pane, view = app.query_one(LogPane), app.query_one(LogView)
        queries, lookups = [], []
        real_query, real_pane = pane.query_one, app.pane
        pane.query_one = lambda *a, **k: (queries.append(a), real_query(*a, **k))[1]  # type: ignore[method-assign]
        app.pane = lambda name: (lookups.append(name), real_pane(name))[1]  # type: ignore[method-assign]
        src.feed({"push": "log", "data": {"slot": "0", "lines": ["one", BATCH, "two"]}})
        await until(pilot, lambda: len(view.lines) == 3)
        assert queries == []
        shown, folded = app.logbuf.add("0", ["three", BATCH]), app.logbuf.add("0", [BATCH])
        lookups.clear()  # (no await from here: only these calls look anything up)
        assert app._log_changed_by(shown) and lookups == []
        assert not app._log_changed_by(folded) and lookups == ["logs"]


async def test_a_following_append_reads_the_views_size_without_the_compositor():
    """Issue 49: a following view's append reads its size from its last layout (a
    ScrollView's container size) and refreshes its own region, as ScrollView's scroll does:
    `size` and a refresh of no region asked the compositor for the view's region, a walk up
    the DOM to the screen each (~40 calls a second). The new line is still the bottom row,
    on screen, and a resize still reaches the view (the rows follow the new height). An
    unwrapped line is its row (not split), and no placeholder is cleared when none shows."""
    import sys

    from textual.dom import DOMNode

    src = ScriptedSource(status_with(), logs=[f"line {i}" for i in range(200)])
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view, pane = app.query_one(LogView), app.query_one(LogPane)
        await pilot.press("l")
        await until(pilot, lambda: view.scroll_y == view.max_scroll_y > 0)
        walks = calls = 0
        screen_code = DOMNode.screen.fget.__code__  # type: ignore[attr-defined]

        def count(frame, event, arg):
            nonlocal walks, calls
            walks += event == "call" and frame.f_code is screen_code
            calls += event in ("call", "c_call")

        lines = app.logbuf.add("0", ["new-0"])
        sys.setprofile(count)
        try:
            pane.append(lines)
        finally:
            sys.setprofile(None)
        assert walks == 0
        # 142 calls (~185 before: the walks, a line split into rows when the view does not
        # wrap, the placeholder cleared when there is none; 146 with the reactives read from
        # the class at each append), most of them Textual's refresh
        assert calls <= 144, calls
        await pilot.pause()
        bottom = view.scrollable_content_region.height - 1
        assert view.scroll_y == view.max_scroll_y and first_row_at(view, bottom) == "new-0"
        assert "new-0" in app.export_screenshot()
        await pilot.resize_terminal(120, 30)
        await pilot.pause()
        pane.append(app.logbuf.add("0", ["new-1"]))
        await pilot.pause()
        bottom = view.scrollable_content_region.height - 1
        assert view.container_size == view.size and first_row_at(view, bottom) == "new-1"
        assert "new-1" in app.export_screenshot()


def test_a_rows_segments_are_what_textual_crops_extends_and_styles():
    """Issue 49: a row is styled and padded from its line's segments (one Strip for the row
    and its scrollbar cell, where Textual's crop_extend and apply_style made two more): the
    segments are theirs for a row that fits, fills the width, is wider, is scrolled, has
    several styles (a search match), a control segment or none."""
    from rich.segment import Segment
    from rich.style import Style
    from textual.strip import Strip

    from sgltui.tui.widgets.logs import _row_segments

    view_style = Style(color="white", bgcolor="black")
    red, hl = Style(color="red"), Style(bold=True, bgcolor="yellow")
    rows = [
        Strip([Segment("short line", red)]),
        Strip([Segment("x" * 20, red)]),
        Strip([Segment("a much longer line than the view", red)]),
        Strip([Segment("found ", red), Segment("here", red + hl), Segment(" and on", red)]),
        Strip([Segment("plain", None), Segment("\x1b[0m", None, [(1,)]), Segment("end", red)], 8),
        Strip([], 0),
        Strip([Segment("wide 字字", red)]),
    ]
    for row in rows:
        for scroll_x in (0, 3):
            want = list(
                row.crop_extend(scroll_x, scroll_x + 20, view_style).apply_style(view_style)
            )
            got = _row_segments(row, scroll_x, 20, view_style)
            assert got == want, (row, scroll_x)
            assert Strip(got).cell_length == 20


async def test_a_lines_strip_counts_its_cells_ascii_wide_or_controlled():
    """Issue 49: a printable ASCII line is a cell a character (its length, without
    cell_len's calls); a line with wide characters, tabs or control characters is counted
    in cells as before (the control characters dropped)."""
    from rich.cells import cell_len

    src = ScriptedSource(status_with(), logs=["x"])
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        pane = app.query_one(LogPane)
        for text in ["plain ascii", "wide 字字 line", "tab\there", "bell\x07 and \x1b[0m", ""]:
            (line,) = app.logbuf.add("0", [text])
            strip = pane._strip(line)
            shown = "".join(seg.text for seg in strip)
            assert strip.cell_length == cell_len(shown), text
            assert "\x07" not in shown and "\t" not in shown
