"""Layout snapshots (pytest-textual-snapshot) from scripted, fixed-time sources.

Regenerate after an intended change: pytest tests/tui/test_snapshots.py --snapshot-update,
then review tests/tui/__snapshots__/ (snapshot_report.html shows the diff on failure).
"""

from __future__ import annotations

import pytest

from tests.support.scripted import (
    T0,
    ScriptedSource,
    make_host_sample,
    make_host_status,
    make_sample,
    make_slot,
    make_status,
    slot_names,
)

from .helpers import app_with, until

pytestmark = pytest.mark.usefixtures("utc")


def samples(n=90):
    return [{"push": "sample", "data": make_sample(t)} for t in range(1, n)]


def samples_with_a_swap(n=90, at=60):
    """Samples with a finished swap to demo-no-mtp in the middle: the chart marks it."""
    swap = {
        "v": 1,
        "ts": T0 + at + 0.5,
        "type": "swap.done",
        "slot": "0",
        "from": "demo-mtp",
        "to": "demo-no-mtp",
        "ok": True,
        "timings_s": {"total": 9.0},
    }
    out = samples(n)
    out.insert(at, {"push": "event", "data": swap})
    return out


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
    status = make_status([slot], server_gib=20.0)
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
    app = app_with(ScriptedSource(make_status(), samples_with_a_swap()))
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle(app))


@pytest.mark.parametrize("size", [(100, 30), (160, 50)])
def test_layout_sizes(snap_compare, size):
    app = app_with(ScriptedSource(make_status(), samples_with_a_swap()))
    assert snap_compare(app, terminal_size=size, run_before=settle(app))


def test_log_search(snap_compare):
    logs = [f"[2026-12-02 15:40:{i % 60:02d}] request {i} finished" for i in range(120)]
    logs[40] += " after a retry"
    logs[100] += " after a retry"
    app = app_with(ScriptedSource(make_status(), samples(20), logs=logs))

    async def run_before(pilot):
        await settle(app)(pilot)
        await pilot.press("ctrl+f", *"retry", "enter", "n")
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_bench_dialog(snap_compare):
    app = app_with(ScriptedSource(make_status(), samples()))

    async def run_before(pilot):
        await settle(app)(pilot)
        await pilot.press("b")
        await pilot.pause(0.3)
        from textual.widgets import Input

        for box in app.screen.query(Input):  # a blinking cursor would make the snapshot flaky
            box.cursor_blink = False
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_reattach_shows_the_agents_history(snap_compare, tmp_path):
    """A TUI opening on a running agent: the chart's last minutes come from the agent's
    timeline, the Activity from the session's events, the Bench tab from its result files."""
    import json

    from sgltui.bench import compare

    session = tmp_path / "20261202-154000-host"
    (session / "bench").mkdir(parents=True)
    events = [
        {"v": 1, "ts": 1000.0 + i * 30, "type": "command", "client": "cli:42@host", "op": op}
        for i, op in enumerate(["start", "swap", "bench_start"])
    ]
    (session / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    results = [
        {"profile": p, "concurrency": c, "metrics": {"output_throughput": tok}}
        for p, c, tok in (
            ("demo-mtp", 4, 380.0),
            ("demo-mtp", 16, 700.0),
            ("demo-no-mtp", 4, 300.0),
        )
    ]
    (session / "bench" / "r1.json").write_text(
        json.dumps(
            {"v": 1, "run_id": "r1", "results": results, "comparison": compare.build(results)}
        )
    )
    status = make_status()
    status["agent"]["session_dir"] = str(session)
    history = {
        "series": {
            f"engine.0.{key}": [[1000.0 + t, value(t)] for t in range(0, 300, 2)]
            for key, value in (
                ("gen_throughput", lambda t: 150 + 60 * ((t // 20) % 3)),
                ("num_running_reqs", lambda t: 4.0),
                ("num_queue_reqs", lambda t: float(t // 40 % 2)),
                ("token_usage", lambda t: 0.3 + t / 1000),
                ("accept_length", lambda t: 2.4),
            )
        }
    }
    src = ScriptedSource(status, on_call=lambda op, args, s: history if op == "timeline" else None)
    app = app_with(src)

    async def run_before(pilot):
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 150)
        await until(pilot, lambda: len(app.model.activity) >= 3 and "r1" in app.model.bench)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
    assert app.model.bench["r1"].result is not None


def test_profiles_pane_marks(snap_compare):
    """Validity at a glance: ✓, ✗ with the first error, ⚠ a host pool over the RAM (issue 15)."""
    status = make_status()
    status["profiles"][2].update(
        host_pool_gib=240.0,
        host_pool_problem="host pool 240 GiB > 187 GiB free RAM",
        host_pool_how="hicache-ratio 2 x device pool 120.0 GiB",
    )
    status["profiles"].append(
        {
            "name": "broken-one",
            "key": "5",
            "launcher": "sglang",
            "valid": False,
            "problem": 'broken-one.toml:4: mem-fraction-static: must be a number, got "lots"',
        }
    )
    app = app_with(ScriptedSource(status, samples()))

    async def run_before(pilot):
        await settle(app)(pilot)
        app.query_one("#profile-list").highlighted = 2
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


def host_samples(slots, n=90, swap_at=60):
    """Samples of a host of several slots, with slot b's finished swap: the chart's total, a
    series per slot (where there is room) and the swap marked with b's name."""
    out = [{"push": "sample", "data": make_host_sample(t, slots)} for t in range(1, n)]
    swap = {"v": 1, "ts": T0 + swap_at + 0.5, "type": "swap.done", "slot": "b",
            "from": "demo-mtp", "to": "demo-no-mtp", "ok": True, "timings_s": {"total": 9.0}}  # fmt: skip
    out.insert(swap_at, {"push": "event", "data": swap})
    return out


def test_eight_slots_80x24(snap_compare):
    """Eight slots in a pool on an 80x24 terminal: every slot and the pool in the slots view."""
    profiles = ["demo-no-mtp" if i % 3 == 0 else "demo-mtp" for i in range(8)]
    status = make_host_status(8, profiles)
    src = ScriptedSource(status, host_samples(slot_names(8)), status_follows_samples=True)
    app = app_with(src)
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle(app))


def test_eight_slots_120x40(snap_compare):
    """Eight slots in a pool at 120x40 (issue 39): one line per GPU in the memory pane, the
    chart's total with its plot and axis (no row per slot: no room), every slot and the pool
    in the slots view, the log below; the screen does not scroll."""
    profiles = ["demo-no-mtp" if i % 3 == 0 else "demo-mtp" for i in range(8)]
    status = make_host_status(8, profiles)
    src = ScriptedSource(status, host_samples(slot_names(8)), status_follows_samples=True)
    app = app_with(src)
    assert snap_compare(app, terminal_size=(120, 40), run_before=settle(app))


def test_two_slots_160x50(snap_compare):
    status = make_host_status(2, ["demo-mtp", "demo-no-mtp"])
    src = ScriptedSource(status, host_samples(slot_names(2)), status_follows_samples=True)
    app = app_with(src)
    assert snap_compare(app, terminal_size=(160, 50), run_before=settle(app))
