"""A "logs" push (the agent's tick of every slot's lines, subscribe logs="tick") shows in the
log pane as the "log" pushes it stands for: each slot's lines tagged with their slot, a new
launch marked, folded lines kept out of the pane (issue 39)."""

from __future__ import annotations

from sgltui.tui.scripted import make_host_status
from sgltui.tui.widgets.logs import LogView

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
