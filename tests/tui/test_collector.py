"""The garbage collector's pace in the TUI's process (sgltui/tui/collector.py, issue 49): set
once, after the first STATUS is drawn, and never in a process the app shares (headless)."""

from __future__ import annotations

import gc
import subprocess
import sys

from sgltui.tui import collector
from tests.support.scripted import ScriptedSource

from .helpers import app_with, status_with, until


def test_a_tui_process_collects_at_its_pace_and_freezes_what_starting_made_once():
    code = (
        "import gc; from sgltui.tui import collector\n"
        "junk = [[] for _ in range(1000)]\n"
        "first = collector.settle(False)\n"
        "frozen = gc.get_freeze_count()\n"
        "again = collector.settle(False)\n"
        "print(first, again, gc.get_threshold()[0], frozen > 1000, gc.get_freeze_count() == frozen)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert out == ["True", "False", str(collector.YOUNG_THRESHOLD), "True", "True"]


def test_a_headless_app_leaves_the_collector_alone():
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    assert collector.settle(True) is False
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


async def test_the_app_settles_the_collector_once_it_has_drawn_its_first_status(monkeypatch):
    calls: list[bool] = []
    monkeypatch.setattr(collector, "settle", lambda headless: calls.append(headless) or False)
    app = app_with(ScriptedSource(status_with(), logs=[]))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.first_status.is_set())
        await until(pilot, lambda: calls == [True])  # (run_test is headless)
        await pilot.pause(0.2)
        assert calls == [True]
