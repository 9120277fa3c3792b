"""A "logs" push (the agent's tick of every slot's lines, subscribe logs="tick") shows in the
log pane as the "log" pushes it stands for: each slot's lines tagged with their slot, a new
launch marked, folded lines kept out of the pane (issue 39)."""

from __future__ import annotations

from sgltui.tui.widgets.logs import LogView
from tests.support.scripted import make_host_status

from .helpers import ScriptedSource, app_with, until
from .test_logs import BATCH, opened

SIZE = (120, 40)


def rows(view: LogView) -> list[str]:
    return [
        "".join(seg.text for seg in view.render_line(y)).rstrip() for y in range(len(view.lines))
    ]


async def test_a_ticks_logs_push_shows_every_slots_lines():
    src = ScriptedSource(make_host_status(2), logs=[])
    app = app_with(src)
    async with app.run_test(size=SIZE) as pilot:
        await opened(app, pilot)
        view = app.query_one(LogView)
        src.feed(
            {
                "push": "logs",
                "data": [
                    {"slot": "a", "launch_id": "L-a", "lines": ["alpha one", BATCH]},
                    {"slot": "b", "launch_id": "L-b", "lines": ["beta one"]},
                    {"slot": "a", "launch_id": "L-a2", "lines": ["alpha two"]},
                    "not a slot's lines",  # skipped, as a malformed push is
                ],
            }
        )
        await until(pilot, lambda: len(view.lines) >= 4, show=lambda: rows(view))
        shown = "\n".join(rows(view))
        for text in ("alpha one", "beta one", "alpha two", "L-a2"):
            assert text in shown, shown
        assert "Decode batch" not in shown  # folded, as from a "log" push
        assert shown.index("alpha one") < shown.index("beta one") < shown.index("alpha two")
        assert "[a]" in shown and "[b]" in shown, shown


async def test_a_fleet_asks_each_host_for_its_lines_per_tick_and_names_their_slots_host_slash():
    import asyncio

    from .fleet_fakes import fleet_source

    src, calls = fleet_source({"h1": make_host_status(2), "h2": make_host_status(1, pool=None)})
    await src.connect()
    pushes = src.pushes()
    assert (await anext(pushes)) == {"push": "fleet"}
    src._route(
        "h1",
        {
            "push": "logs",
            "data": [
                {"slot": "a", "launch_id": "L", "lines": ["one"]},
                {"slot": "b", "launch_id": "L", "lines": ["two"]},
            ],
        },
    )
    got = await asyncio.wait_for(anext(pushes), 2.0)
    while got["push"] != "logs":  # (the hosts' log tails come first)
        got = await asyncio.wait_for(anext(pushes), 2.0)
    assert [(d["slot"], d["lines"]) for d in got["data"]] == [("h1/a", ["one"]), ("h1/b", ["two"])]
    subscribes = [args for _, op, args in calls if op == "subscribe"]
    assert subscribes and all(a == {"logs": "tick"} for a in subscribes), calls
    await src.close()
