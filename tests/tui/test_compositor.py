"""The main screen's sparse partial updates write exactly what Textual's own would."""

from __future__ import annotations

import asyncio

from textual._compositor import Compositor

from sgltui.tui.compositor import MainScreen, SparseCompositor

from .helpers import ScriptedSource, app_with, status_with


async def test_sparse_partial_updates_match_textuals(monkeypatch):
    compared = {"updates": 0, "different": 0}
    src = ScriptedSource(
        status_with(running=2),
        live_interval=0.2,
        logs=[f"line {i} Decode batch" for i in range(40)],
    )
    app = app_with(src)
    sparse = SparseCompositor.render_partial_update

    def both(self):
        regions = set(self._dirty_regions)
        ours = sparse(self)
        self._dirty_regions.update(regions)
        theirs = Compositor.render_partial_update(self)
        assert (ours is None) == (theirs is None)
        if ours is not None:
            compared["updates"] += 1
            if ours.render_segments(app.console) != theirs.render_segments(app.console):
                compared["different"] += 1
        return ours

    monkeypatch.setattr(SparseCompositor, "render_partial_update", both)
    async with app.run_test(size=(120, 40)) as pilot:
        assert isinstance(app.screen, MainScreen)
        await asyncio.sleep(2.5)  # samples, log lines (a full tail that scrolls), chart
        await pilot.press("tab")
        await asyncio.sleep(0.5)
    assert compared["updates"] >= 5
    assert compared["different"] == 0
