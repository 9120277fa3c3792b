"""The app's wiring, driven by keys against a scripted source (no agent needed)."""

from __future__ import annotations

import json
import time

from textual.widgets import OptionList

from sgltui.tui.config import TuiConfig
from sgltui.tui.screens import BenchDialog, Confirm, DrainChoice
from sgltui.tui.widgets.activity import ActivityPane
from sgltui.tui.widgets.logs import LogPane, LogView

from .helpers import ScriptedSource, app_with, event, ops, status_with, until, write_bench_run

SIZE = (120, 40)


async def started(app, pilot):
    # Connected, the first status in, and drawn: no flush of pushed changes still pending.
    await until(
        pilot,
        lambda: (
            app.model.connected
            and app.first_status.is_set()
            and not app._flush_scheduled
            and not app._dirty
        ),
    )
    await pilot.pause(0.15)


async def test_profile_key_swaps_at_once_when_no_request_runs():
    src = ScriptedSource(status_with(running=0))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: ops(src, "swap"))
        assert ops(src, "swap") == [{"profile": "demo-no-mtp", "slot": "0", "drain": "wait"}]


async def test_profile_key_asks_drain_force_cancel_when_requests_run():
    src = ScriptedSource(status_with(running=3))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, DrainChoice))
        await pilot.press("c")
        await until(pilot, lambda: not isinstance(app.screen, DrainChoice))
        await pilot.pause(0.1)
        assert ops(src, "swap") == []
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, DrainChoice))
        await pilot.press("f")
        await until(pilot, lambda: ops(src, "swap"))
        assert ops(src, "swap")[0]["drain"] == "force"


async def test_same_profile_key_does_not_restart():
    src = ScriptedSource(status_with(running=0))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("2")  # demo-mtp is already ready
        await pilot.pause(0.2)
        assert ops(src, "swap") == [] and ops(src, "start") == []


async def test_start_when_stopped_by_key_and_by_highlight():
    src = ScriptedSource(status_with(state="stopped"))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("3")
        await until(pilot, lambda: ops(src, "start"))
        assert ops(src, "start")[0]["profile"] == "demo-mtp-hicache"
        app.query_one("#profile-list", OptionList).highlighted = 3
        await pilot.press("s")
        await until(pilot, lambda: len(ops(src, "start")) == 2)
        assert ops(src, "start")[1]["profile"] == "demo-no-mtp-hicache"


async def test_stop_asks_then_stops():
    src = ScriptedSource(status_with(running=0))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.press("y")
        await until(pilot, lambda: ops(src, "stop"))
        assert ops(src, "stop") == [{"slot": "0", "drain": "wait"}]


async def test_keymap_from_config_remaps_by_id():
    src = ScriptedSource(status_with(running=0))
    app = app_with(src, config=TuiConfig(keymap={"server.stop": "k"}, confirm_stop=False))
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("x")
        await pilot.pause(0.2)
        assert ops(src, "stop") == []
        await pilot.press("k")
        await until(pilot, lambda: ops(src, "stop"))


async def test_log_filter_level_and_clear():
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        view = app.query_one(LogView)
        assert len(view.lines) == len(src.logs) - 1  # the Decode batch line is folded away
        await pilot.press("slash")
        await pilot.press(*"Load w")
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert len(view.lines) == 2
        assert "filter 'Load w'" in str(app.query_one("#lower").get_tab("tab-logs").label)
        # Lines arriving later are filtered too.
        src.feed(
            {
                "push": "log",
                "data": {"slot": "0", "lines": ["Load weight begin. again", "other line"]},
            }
        )
        await until(pilot, lambda: len(view.lines) == 3)
        await pilot.press("e")  # warnings and errors only, on top of the filter
        await pilot.pause(0.1)
        assert len(view.lines) == 0
        await pilot.press("e", "e")
        await pilot.press("slash", "escape")  # escape clears the filter
        await pilot.pause(0.1)
        assert len(view.lines) == len(src.logs) + 2 - 1


async def test_follow_pauses_while_scrolled_back_and_resumes():
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        src.feed({"push": "log", "data": {"slot": "0", "lines": [f"line {i}" for i in range(200)]}})
        view = app.query_one(LogView)
        await until(pilot, lambda: len(view.lines) > 200 and view.scroll_y == view.max_scroll_y > 0)
        view.scroll_to(y=10, animate=False)
        pane = app.query_one(LogPane)
        # scrolling back pauses following (the app notices on its next refresh; wait for it)
        await until(
            pilot,
            lambda: view.scroll_y == 10 and not pane.following,
            show=lambda: (view.scroll_y, pane.following),
        )
        src.feed({"push": "log", "data": {"slot": "0", "lines": [f"more {i}" for i in range(20)]}})
        await until(pilot, lambda: len(view.lines) > 220)
        tab = app.query_one("#lower").get_tab("tab-logs")
        await until(pilot, lambda: "paused" in str(tab.label), show=lambda: str(tab.label))
        await pilot.pause(0.1)
        assert view.scroll_y == 10  # stayed where the user is reading
        await pilot.press("l", "G")
        await until(pilot, lambda: view.scroll_y == view.max_scroll_y)
        assert pane.following


async def test_log_is_bounded_by_config():
    src = ScriptedSource(status_with(), logs=[])
    app = app_with(src, config=TuiConfig(log_max_lines=150))
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        src.feed({"push": "log", "data": {"slot": "0", "lines": [f"l{i}" for i in range(400)]}})
        await until(pilot, lambda: len(app.logbuf.lines) == 150)
        await pilot.pause(0.2)
        assert len(app.query_one(LogView).lines) == 150


async def test_search_jumps_to_match():
    src = ScriptedSource(
        status_with(), logs=[f"row {i}" for i in range(300)] + ["needle here"] + ["x"] * 50
    )
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("ctrl+f", *"needle", "enter")
        await pilot.pause(0.2)
        view = app.query_one(LogView)
        top = int(view.scroll_y)
        assert top <= 300 < top + view.scrollable_content_region.height
        assert not app.query_one(LogPane).following


async def test_commands_from_other_clients_show_in_activity():
    src = ScriptedSource(status_with())
    app = app_with(src, own_client="tui:1@h")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await started(app, pilot)
        src.feed(
            event(
                "command",
                ts=1764690000.0,
                client="cli:77@box",
                slot="0",
                op="swap",
                args={"profile": "demo-no-mtp"},
            )
        )
        await until(pilot, lambda: app.model.activity_total == 1)
        await pilot.press("a")  # the activity tab
        pane = app.query_one(ActivityPane)
        await until(pilot, lambda: len(pane.lines) == 1)
        text = "".join(seg.text for seg in pane.lines[0])
        assert "cli:77@box" in text and "swap to demo-no-mtp" in text
        assert any("cli:77@box" in str(n.message) for n in app._notifications)


async def test_reconnects_after_the_agent_goes_away():
    class Flaky(ScriptedSource):
        fail = 2

        async def connect(self):
            await super().connect()
            if self.fail:
                self.fail -= 1
                raise ConnectionRefusedError("no agent")

    src = Flaky(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.connected, timeout=8)
        assert src.connects == 3
        # The push stream ending means the agent went away: the app says so and reconnects.
        src.script = []
        app.model.connected = True

        async def ended():
            return
            yield

        src.pushes = ended  # next pushes() call ends at once, as when the socket closes
        app.consume_source()
        await until(pilot, lambda: src.connects >= 4)


async def test_read_only_source_refuses_commands():
    src = ScriptedSource(status_with(running=0))
    src.read_only = True
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("1", "x", "s", "b")
        await pilot.pause(0.2)
        assert [
            op
            for op, _ in src.calls
            if op not in ("status", "logs", "bench_list", "profiles", "timeline")
        ] == []
        assert app.exit_note() is None
        assert src.read_only_label in str(app.query_one("#topbar").render())


async def test_bench_dialog_starts_a_run_with_a_spec():
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, BenchDialog))
        await pilot.press("enter")
        await until(pilot, lambda: ops(src, "bench_start"))
        spec = ops(src, "bench_start")[0]["spec"]
        assert (
            spec["profiles"] == ["demo-mtp"]
            and spec["concurrency"] == [1, 4, 16]
            and spec["requests"] == 64
        )


async def test_bench_results_fill_the_comparison(tmp_path):
    results = [
        {
            "profile": "demo-mtp",
            "concurrency": 4,
            "metrics": {"output_throughput": 400.0, "median_ttft_ms": 50.0},
            "capacity": {"max_running_requests": 4},
        },
        {
            "profile": "demo-no-mtp",
            "concurrency": 4,
            "metrics": {"output_throughput": 800.0},
            "capacity": None,
        },
    ]
    path = write_bench_run(tmp_path / "r1.json", "r1", results)
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        src.feed(event("bench.done", client=None, slot=None, run_id="r1", path=path, state="done"))
        table = app.query_one("#bench-table")
        await until(pilot, lambda: table.row_count == 2)
        first = [str(c) for c in table.get_row_at(0)]
        second = [str(c) for c in table.get_row_at(1)]
        assert first[0] == "★ demo-no-mtp" and first[3] == "100%"
        assert second[0].strip() == "demo-mtp" and second[3] == "50%" and second[8] == "4"


async def test_screenshot_goes_to_the_session_dir(tmp_path):
    src = ScriptedSource(status_with())
    src.status["agent"]["session_dir"] = str(tmp_path / "session")
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        app.notify("a toast that must not be in the picture", timeout=30)
        await pilot.pause(0.2)
        await pilot.press("S")
        shots = tmp_path / "session" / "screenshots"
        await until(pilot, lambda: shots.is_dir() and list(shots.glob("*.svg")))
        svg = next(shots.glob("*.svg")).read_text()
        assert "<svg" in svg[:500]
        assert "https://cdn" not in svg and "local(" in svg  # no font fetched from the web
        assert "toast" not in svg


async def test_quit_says_servers_keep_running():
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("q")
    assert (
        "servers keep running" in app.return_value
        and "demo-mtp ready on 127.0.0.1:30000" in app.return_value
    )


async def test_command_palette_offers_every_action_and_profile():
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for want in (
            "Start (s)",
            "Stop (x)",
            "Restart (r)",
            "Bench (b)",
            "Filter (/)",  # keys as people read them, not Textual names
            "Help (h)",
            "Swap to demo-no-mtp (1)",
            "Logs (l)",
            "Screenshot (S)",
        ):
            assert want in titles, want


async def test_themes_switch_and_logs_follow_the_theme():
    src = ScriptedSource(status_with(), logs=["torch.OutOfMemoryError: CUDA out of memory"])
    app = app_with(src, theme="sgltui-paper")
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        assert app.theme == "sgltui-paper"
        view = app.query_one(LogView)
        paper = list(view.lines[0])[0].style.color.triplet.hex
        assert paper == app.theme_variables["error"].lower()  # the error colour of the paper theme
        app.theme = "sgltui-night"
        await pilot.pause(0.3)
        night = list(view.lines[0])[0].style.color.triplet.hex
        assert night == app.theme_variables["error"].lower() and night != paper


async def test_a_new_launch_is_marked_in_the_log():
    src = ScriptedSource(status_with(), logs=[])
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        src.feed(
            {"push": "log", "data": {"slot": "0", "launch_id": "L1", "lines": ["old server line"]}}
        )
        src.feed(
            {"push": "log", "data": {"slot": "0", "launch_id": "L2", "lines": ["new server line"]}}
        )
        await until(pilot, lambda: len(app.logbuf.lines) == 3)
        assert [l.text for l in app.logbuf.lines] == [
            "old server line",
            "──── L2 ────",
            "new server line",
        ]


async def test_bench_pane_shows_the_bench_comparison_and_a_try_higher_hint(tmp_path):
    """The TUI shows the comparison the bench computed (the CLI's table and ranking), not a
    ranking of its own, and says when the best point is the highest concurrency tried."""
    from sgltui.bench import compare

    results = [
        {"profile": "demo-mtp", "concurrency": c, "metrics": {"output_throughput": tok}}
        for c, tok in ((1, 100.0), (4, 300.0))
    ] + [
        {"profile": "demo-no-mtp", "concurrency": c, "metrics": {"output_throughput": tok}}
        for c, tok in ((1, 120.0), (4, 90.0))
    ]
    comparison = compare.build(results, job_completions=1000, bench_output_len=256)
    # As the runner writes it: NaNs of single runs stored as null (a crash seen in tmux when
    # the TUI used the stored comparison as is), the job size in the spec.
    stored = json.loads(json.dumps(comparison).replace("NaN", "null"))
    spec = {"job_completions": 1000, "output_len": 256}
    path = write_bench_run(tmp_path / "r2.json", "r2", results, spec=spec, comparison=stored)
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        src.feed(event("bench.done", run_id="r2", path=path))
        await pilot.press("c")
        table = app.query_one("#bench-table")
        await until(pilot, lambda: table.row_count == 4)
        cli = compare.table_rows(comparison)
        assert [[str(c) for c in table.get_row_at(i)] for i in range(4)] == cli
        status = str(app.query_one("#bench-status").render())
        assert comparison["job"]["recommendation"][:40] in status.replace("\n", " ")
        assert "demo-mtp was fastest at the highest concurrency tried (4): try higher" in status
        assert "demo-no-mtp was fastest" not in status


async def test_a_profile_capped_at_its_best_concurrency_is_not_told_to_try_higher(tmp_path):
    """Issue 51 item 13: "try higher" was shown for MTP capped at 4 running requests (the server
    queues anything above): the Bench tab says the cap, as the Insight tab does."""
    results = [
        {"profile": "demo-mtp", "concurrency": c, "metrics": {"output_throughput": tok},
         "capacity": {"max_running_requests": 4}}
        for c, tok in ((1, 100.0), (4, 300.0))
    ] + [
        {"profile": "demo-no-mtp", "concurrency": c, "metrics": {"output_throughput": tok},
         "capacity": {"max_running_requests": 48}}
        for c, tok in ((1, 120.0), (4, 400.0))
    ]  # fmt: skip
    from sgltui.bench import compare

    comparison = compare.build(results)
    path = write_bench_run(tmp_path / "r3.json", "r3", results, comparison=comparison)
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        src.feed(event("bench.done", run_id="r3", path=path))
        await pilot.press("c")
        await until(pilot, lambda: app.query_one("#bench-table").row_count == 4)
        status = str(app.query_one("#bench-status").render()).replace("\n", " ")
        assert "demo-mtp was fastest at the highest concurrency" not in status
        assert "demo-mtp runs at most 4 requests at once (max running 4)" in status, status
        assert "demo-no-mtp was fastest at the highest concurrency tried (4): try higher" in status


async def test_demo_load_is_in_the_header_and_in_the_quit_note():
    src = ScriptedSource(status_with())
    src.status["agent"]["demo_load"] = True
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await until(pilot, lambda: "demo load running" in str(app.query_one("#topbar").render()))
        await pilot.press("q")
    assert "`sgltui demo --stop`" in app.return_value and "`sgltui stop`" in app.return_value


async def test_accept_length_row_goes_with_a_swap_to_a_plain_profile():
    from sgltui.tui.widgets.throughput import ThroughputPane
    from tests.support.scripted import make_sample

    src = ScriptedSource(
        status_with(), [{"push": "sample", "data": make_sample(t)} for t in range(1, 20)]
    )
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        chart = app.query_one(ThroughputPane)
        await until(pilot, lambda: chart._has_spec)
        plain = make_sample(30)
        for eng in plain["engine"].values():
            eng["accept_length"] = None
        src.feed({"push": "sample", "data": plain})
        await until(pilot, lambda: not chart._has_spec)


async def test_profiles_are_listed_in_key_order():
    from sgltui.tui import typed
    from sgltui.tui.widgets.profiles import ordered

    profiles = [
        typed.profile({"name": n, "key": k})
        for n, k in (
            ("a", "1"),
            ("c", "3"),
            ("d", None),
            ("b", "2"),
            ("e", "x"),
            ("f", "10"),
            ("g", "@"),
            ("h", "!"),
        )
    ]
    assert [p.name for p in ordered(profiles)] == ["a", "b", "c", "f", "h", "g", "e", "d"]
    src = ScriptedSource(status_with())
    src.status["profiles"] = list(reversed(src.status["profiles"]))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        box = app.query_one("#profile-list", OptionList)
        await until(pilot, lambda: len(box.options) == len(src.status["profiles"]))
        options = box.options
        keys = [str(o.prompt).split("]")[1][0] for o in options]  # "[b $accent]1[/] name"
        assert keys == sorted(keys) and keys[0] == "1", keys


async def test_reattach_reads_the_latest_bench_run_the_status_already_names(tmp_path):
    """Seen in tmux: after a re-attach the status names the latest run (without its result),
    bench_list lists it too, and the Bench tab stayed empty."""
    results = [{"profile": "demo-mtp", "concurrency": 2, "metrics": {"output_throughput": 50.0}}]
    path = write_bench_run(tmp_path / "r9.json", "r9", results, comparison={})
    run = {"run_id": "r9", "state": "done", "started": 1.0, "path": path}
    src = ScriptedSource(
        status_with(), on_call=lambda op, a, s: [run] if op == "bench_list" else None
    )
    src.status["bench"] = dict(run)
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await until(pilot, lambda: app.model.bench.get("r9") and app.model.bench["r9"].result)
        await pilot.press("c")
        await until(pilot, lambda: app.query_one("#bench-table").row_count == 1)


async def test_the_drain_dialog_counts_requests_live():
    """Issue 37: the swap dialog kept '1 request(s) in flight' while the legend showed running
    3. Its count follows the samples while it is open."""
    from tests.support.scripted import make_engine, make_sample

    src = ScriptedSource(status_with(running=1))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("1")
        await until(pilot, lambda: isinstance(app.screen, DrainChoice))
        count = app.screen.query_one("#drain-count")
        assert "1 request(s) in flight now" in str(count.render())
        sample = make_sample(50.0, running=3)
        sample["engine"] = {"0": dict(make_engine(50.0, 3), num_queue_reqs=0)}
        src.feed({"push": "sample", "data": sample})
        await until(
            pilot,
            lambda: "3 request(s) in flight now" in str(count.render()),
            show=lambda: str(count.render()),
        )


async def test_bench_estimate_uses_the_profiles_rate_per_request_and_says_how_old():
    """Issue 37: the estimate used 'the 75.7 tok/s seen lately', the slot's total under the
    demo load. It uses the serving profile's speed per request, named, over the last minute."""
    from sgltui.tui.views import per_request_rate
    from tests.support.scripted import make_engine, make_sample

    src = ScriptedSource(status_with(running=2))
    for t in range(1, 30):
        sample = make_sample(float(t), running=2)
        sample["engine"] = {"0": dict(make_engine(float(t), 2), gen_throughput=100.0)}
        src.feed({"push": "sample", "data": sample})
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await until(pilot, lambda: len(app.model.series_values("running")) > 10)
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, BenchDialog))
        text = str(app.screen.query_one("#bench-estimate").render())
        import re

        m = re.search(r"(\d+) tok/s per request \(demo-mtp, last minute\)", text)
        assert m and 40 <= int(m.group(1)) <= 60, text  # 100 tok/s over 2 requests
    assert per_request_rate([100.0, 0.0, 90.0], [2, 0, 3]) == 190.0 / 5


async def test_bench_from_the_slots_view_benches_the_slot_on_screen():
    """Issue 37, seen in the first-hour run: with slots a and b the bench dialog's run was
    refused ('no slot '0'; slots: a, b'): its spec named no slot."""
    from tests.support.scripted import make_host_status

    src = ScriptedSource(make_host_status(2, ["demo-mtp", "demo-no-mtp"]))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        await pilot.press("o", "down")
        await until(pilot, lambda: app.model.current_id == "b")
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, BenchDialog))
        await pilot.press("enter")
        await until(pilot, lambda: ops(src, "bench_start"))
        assert ops(src, "bench_start")[0]["spec"]["slot"] == "b"


async def test_bench_estimate_uses_the_profiles_own_bench_when_there_is_one(tmp_path):
    """Seen in the first-hour run: 11 s estimated from the demo load's speed per request for a
    point that ran 1.1 s (925 tok/s). A profile benched in this session is estimated from its
    own figures, and the dialog says so and how old they are."""
    results = [{"profile": "demo-mtp", "concurrency": 4, "metrics": {"output_throughput": 800.0}}]
    path = write_bench_run(tmp_path / "r1.json", "r1", results, finished=time.time() - 120)
    src = ScriptedSource(status_with(running=2))
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        src.feed(event("bench.done", client=None, slot=None, run_id="r1", path=path, state="done"))
        await until(pilot, lambda: (app.model.bench.get("r1") or None) is not None)
        await until(pilot, lambda: app.model.bench["r1"].result is not None)
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, BenchDialog))
        for field, value in (("#bench-concurrency", "4"), ("#bench-requests", "100")):
            app.screen.query_one(field).value = value
        app.screen.query_one("#bench-output").value = "80"
        await pilot.pause(0.2)
        text = str(app.screen.query_one("#bench-estimate").render())
        # 100 requests x 80 tokens at 800 tok/s: 10 s
        assert "about 10 s" in text and "demo-mtp as measured by its bench, 2m0" in text, text


async def test_a_running_bench_fills_the_table_point_by_point(tmp_path):
    """Issue 51 item 9: the Bench tab stayed empty until the run ended although its file held
    the finished points. The next point's start re-reads it: a row per measured point."""
    spec = {"profiles": ["demo-mtp", "demo-no-mtp"], "concurrency": [1, 4], "slot": "0"}
    path = tmp_path / "r9.json"
    one = {"profile": "demo-mtp", "concurrency": 1, "repeat": 0,
           "metrics": {"output_throughput": 100.0, "request_throughput": 1.0}}  # fmt: skip
    write_bench_run(path, "r9", [], spec=spec, state="running", comparison=None)
    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        src.feed(event("bench.start", run_id="r9", spec=spec, pid=1, path=str(path)))
        src.feed(event("bench.progress", run_id="r9", point=1, points=4, phase="measure",
                       profile="demo-mtp", concurrency=1))  # fmt: skip
        await pilot.press("c")
        table = app.query_one("#bench-table")
        await pilot.pause(0.3)
        assert table.row_count == 0
        write_bench_run(path, "r9", [one], spec=spec, state="running", comparison=None)
        src.feed(event("bench.progress", run_id="r9", point=2, points=4, phase="starting",
                       profile="demo-mtp", concurrency=4))  # fmt: skip
        await until(pilot, lambda: table.row_count == 1)
        assert [str(c) for c in table.get_row_at(0)][:3] == ["demo-mtp", "1 *", "100"]
        status = str(app.query_one("#bench-status").render())
        assert "So far (1 of 4 points)" in status
        two = dict(one, concurrency=4, metrics={"output_throughput": 300.0})
        write_bench_run(path, "r9", [one, two], spec=spec, state="running", comparison=None)
        src.feed(event("bench.progress", run_id="r9", point=3, points=4, phase="swapping",
                       profile="demo-no-mtp"))  # fmt: skip
        await until(pilot, lambda: table.row_count == 2)


async def test_pushes_of_one_tick_are_drawn_by_one_flush_message():
    """The panes are drawn by the app's own Flush message, once for the pushes of a tick
    (FLUSH_DELAY_S): not through `call_later`, which wrapped the flush in a new `partial`
    whose parameters Textual counted with `inspect.signature` once a second. The legend
    shows the last sample of the three."""
    from sgltui.tui.app import Flush
    from sgltui.tui.widgets.throughput import ThroughputPane
    from tests.support.scripted import make_sample

    flushes: list[object] = []
    src = ScriptedSource(status_with())
    app = app_with(src)

    def hook(message: object) -> None:
        if isinstance(message, Flush):
            flushes.append(message)

    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await started(app, pilot)
        before = len(flushes)
        samples = [make_sample(t) for t in (1.0, 2.0, 3.0)]
        samples[-1]["engine"]["0"]["gen_throughput"] = 4321.0
        for sample in samples:
            src.feed({"push": "sample", "data": sample})
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 3)
        await until(pilot, lambda: not app._flush_scheduled and not app._dirty)
        assert len(flushes) - before == 1
        legend = "".join(seg.text for seg in app.query_one(ThroughputPane).render_line(0))
        assert "4.32k" in legend, legend


async def test_a_flush_asks_once_whether_the_panes_are_linked(monkeypatch):
    """Drawing every pane in a flush asks whether the panes are still linked to the app once
    (of the tabs), not once a pane: a pane is never removed on its own. Since the thirteenth
    round of issue 49 it asks whether the tabs' message loop runs (one read; `is_attached`
    walks every ancestor, ~10 calls a flush), and the panes each tab hides are worked out
    once per tab shown, not per flush. A tab switched to still hides its own panes: the
    Logs tab's lines wait while Jobs shows, and are drawn when it is shown again."""
    from textual.message_pump import MessagePump

    from sgltui.tui import model as M
    from sgltui.tui import panes
    from sgltui.tui.widgets.throughput import ThroughputPane
    from tests.support.scripted import make_sample

    asked: list[str | None] = []
    linked = MessagePump.is_attached
    worked_out: list[str] = []
    off_screen = panes.off_screen

    def counting(self: MessagePump) -> bool:
        asked.append(getattr(self, "id", None))
        return linked.fget(self)

    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        monkeypatch.setattr(MessagePump, "is_attached", property(counting))
        monkeypatch.setattr(
            panes, "off_screen", lambda tab: worked_out.append(tab) or off_screen(tab)
        )
        panes.hidden_by.cache_clear()  # (worked out afresh, counted)
        for t in (5.0, 6.0, 7.0):
            sample = make_sample(t)
            sample["engine"]["0"]["gen_throughput"] = 2468.0
            src.feed({"push": "sample", "data": sample})
            app.mark(*{area for p in panes.PANES for area in p.areas} | {M.SERVERS})
            await until(pilot, lambda: not app._flush_scheduled and not app._dirty)
        monkeypatch.setattr(MessagePump, "is_attached", linked)
        names = {p.name for p in panes.PANES}
        assert [a for a in asked if a in names] == [], asked
        assert worked_out == [panes.tab_id("logs")], worked_out  # (the tab shown at start)
        legend = "".join(seg.text for seg in app.query_one(ThroughputPane).render_line(0))
        assert "2.47k" in legend, legend
        app.show_tab("jobs")
        await pilot.pause()
        src.feed({"push": "log", "data": {"slot": "0", "lines": ["a line the tail shows"]}})
        await until(pilot, lambda: M.LOGS in app._hidden_dirty)  # (not drawn: Jobs shows)
        assert worked_out[-1] == panes.tab_id("jobs") and app.logfeed.new_lines
        app.show_tab("logs")
        await until(pilot, lambda: not app.logfeed.new_lines)  # drawn when shown
        assert M.LOGS not in app._hidden_dirty
        assert worked_out.count(panes.tab_id("logs")) == 1, worked_out


async def test_a_sample_push_asks_none_of_the_event_questions():
    """Issue 49: a sample carries no event; its push updates the model and marks the panes,
    and asks neither whether a STATUS should be read nor whether a job should (each a decode
    and type checks, every second). An event still asks both."""
    from tests.support.scripted import T0, make_sample

    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        asked: list[str] = []
        model = app.model
        real_refresh, real_job = model.needs_status_refresh, model.job_needs_reading
        model.needs_status_refresh = lambda p: (asked.append("status"), real_refresh(p))[1]  # type: ignore[method-assign]
        model.job_needs_reading = lambda p: (asked.append("job"), real_job(p))[1]  # type: ignore[method-assign]
        # (thirteenth round: the flush's scheduling asks first_status until it is set, no more)
        seen = app.first_status.is_set
        app.first_status.is_set = lambda: asked.append("first") or seen()  # type: ignore[method-assign]
        for t in (1.0, 2.0):
            src.feed({"push": "sample", "data": make_sample(t)})
            await until(pilot, lambda t=t: model.series["gen_throughput"][-1][0] == T0 + t)
            await until(pilot, lambda: not app._flush_scheduled and not app._dirty)
            assert asked == ([] if t > 1 else asked[:1]) and set(asked) <= {"first"}, asked
            asked.clear()
        src.feed(event("slot.state", slot="0", state="draining", prev="ready"))
        await until(pilot, lambda: asked == ["status", "job"])


async def test_a_ticks_push_after_a_quiet_spell_is_drawn_at_once(monkeypatch):
    """A tick's pushes (its lines, then its sample, read in one wake-up) are drawn by a Flush
    posted at once and handled after them: no timer to wake the app 0.1 s later to draw. A
    sample within FLUSH_DELAY_S of the last flush waits for the window's end and is drawn then;
    an event (a slot's state) waits the whole window as before."""
    import asyncio

    from sgltui.tui.app import FLUSH_DELAY_S, Flush
    from sgltui.tui.widgets.throughput import ThroughputPane
    from tests.support.scripted import make_sample

    src = ScriptedSource(status_with())
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await started(app, pilot)
        loop = asyncio.get_running_loop()
        timed: list[float] = []  # the waits of the flushes posted by the loop's timer
        real_call_later = loop.call_later

        def call_later(delay, callback, *args, **kwargs):
            if any(isinstance(a, Flush) for a in args):
                timed.append(delay)
            return real_call_later(delay, callback, *args, **kwargs)

        def legend() -> str:
            return "".join(seg.text for seg in app.query_one(ThroughputPane).render_line(0))

        monkeypatch.setattr(loop, "call_later", call_later)
        series = app.model.series["gen_throughput"]
        for tok, shown in ((1357.0, "1.36k"), (2468.0, "2.47k")):
            await pilot.pause(FLUSH_DELAY_S * 2)  # a quiet spell
            sample = make_sample(100.0 + tok)
            sample["engine"]["0"]["gen_throughput"] = tok
            src.feed({"push": "sample", "data": sample})
            await until(pilot, lambda tok=tok: series and series[-1][1] == tok)
            await until(pilot, lambda: not app._flush_scheduled and not app._dirty)
            assert shown in legend() and timed == [], (legend(), timed)
        sample = make_sample(5000.0)
        sample["engine"]["0"]["gen_throughput"] = 3579.0
        src.feed({"push": "sample", "data": sample})  # within the window of the last flush
        await until(pilot, lambda: "3.58k" in legend())
        assert len(timed) == 1 and 0 < timed[0] <= FLUSH_DELAY_S, timed
        await pilot.pause(FLUSH_DELAY_S * 2)
        src.feed(event("slot.state", slot="0", state="draining", prev="ready"))
        await until(pilot, lambda: len(timed) == 2)
        assert timed[1] == FLUSH_DELAY_S, timed
