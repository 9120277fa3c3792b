"""Layout snapshots (pytest-textual-snapshot) from scripted, fixed-time sources.

Regenerate after an intended change: pytest tests/tui/test_snapshots.py --snapshot-update,
then review tests/tui/__snapshots__/ (snapshot_report.html shows the diff on failure).
"""

from __future__ import annotations

import time

import pytest

from sgltui.tui.scripted import ScriptedSource, make_sample, make_slot, make_status

from .helpers import app_with, until


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def samples(n=90):
    return [{"push": "sample", "data": make_sample(t)} for t in range(1, n)]


def settle(app):
    async def run_before(pilot):
        await until(
            pilot, lambda: app.model.connected and len(app.model.series["gen_throughput"]) > 1
        )
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()

    return run_before


def test_main_screen_ready(snap_compare):
    app = app_with(ScriptedSource(make_status(), samples()))
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle(app))


def test_swap_in_progress(snap_compare):
    slot = make_slot(
        profile="demo-no-mtp",
        state="launching",
        phase="loading weights",
        progress=0.35,
        eta_s=21,
        swap={
            "from": "demo-mtp",
            "to": "demo-no-mtp",
            "step": "launching",
            "started_at": 0,
            "elapsed_s": 6.5,
        },
    )
    status = make_status([slot], server_gb=20.0)
    app = app_with(ScriptedSource(status, samples(20)))
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle(app))


def test_failure_with_cause(snap_compare):
    cause = {
        "kind": "oom",
        "summary": "CUDA out of memory while capturing CUDA graphs",
        "fix": "lower --mem-fraction-static (e.g. 0.8) or --cuda-graph-max-bs-decode (e.g. 16)",
        "lines": ["Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB"],
        "exit_code": 1,
    }
    slot = make_slot(profile="demo-no-mtp", state="failed", cause=cause)
    logs = [
        "[2026-12-02 15:40:13] Capture target decode CUDA graph begin. backend=full, avail mem=1.10 GB",
        "[2026-12-02 15:40:14] WARNING The memory capacity is unbalanced. Some GPUs may be occupied.",
        "[2026-12-02 15:40:15] Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB",
        "[2026-12-02 15:40:15] Possible solutions: 1. set --mem-fraction-static to a smaller value",
    ]
    app = app_with(ScriptedSource(make_status([slot]), samples(5), logs=logs))
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle(app))


def test_layout_80x24(snap_compare):
    app = app_with(ScriptedSource(make_status(), samples()))
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle(app))
