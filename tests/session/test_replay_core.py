"""session/replay.py: STATUS at any time of a recorded session, pushes between two times, seeking."""

from __future__ import annotations

import time

import pytest

from sgltui import protocol
from sgltui.session import replay as replay_mod
from sgltui.session.replay import Replay, SeekError, parse_seek

from . import builder

T0 = builder.T0


@pytest.fixture
def rp(isolated_env):
    return Replay.open(builder.build(isolated_env))


@pytest.mark.parametrize(
    "dt, profile, state, phase, swap_step, gen",
    [
        (0.5, None, "stopped", None, None, None),
        (10, "demo-no-mtp", "launching", "loading weights", None, None),
        (50, "demo-no-mtp", "ready", None, None, 1000.0),
        (81, "demo-no-mtp", "draining", None, "draining", None),
        (84, "demo-no-mtp", "stopped", None, "releasing memory", None),
        (130, "demo-mtp", "ready", None, None, 401.0),
        (175, "demo-mtp", "launching", None, "rolling back", None),
        (200, "demo-mtp", "ready", None, None, 402.0),
        (255, "demo-mtp", "crashed", None, None, None),
    ],
)
def test_status_at(rp, dt, profile, state, phase, swap_step, gen):
    st = rp.status_at(T0 + dt)
    (slot,) = st["slots"]
    assert (slot["profile"], slot["state"], slot["phase"]) == (profile, state, phase)
    assert (slot["swap"] or {}).get("step") == swap_step
    assert (st["telemetry"]["engine"].get("0") or {}).get("gen_throughput") == gen


def test_status_details(rp):
    st = rp.status_at(T0 + 50)
    slot = st["slots"][0]
    assert slot["uptime_s"] == pytest.approx(29.0) and slot["launch_id"] == "L1"
    assert (
        # the typed card (every field, defaults included), as a live STATUS sends it
        slot["capacity"] == protocol.to_builtins(protocol.CapacityCard(max_running_requests=48))
        and slot["port"] == 30000
        and slot["api_key_set"]
    )
    assert builder.API_KEY not in repr(st)
    # The disk view is the typed DiskView (every field, defaults included): a replayed session
    # whose disk never refused a write reads ok with no error and nothing dropped.
    disk = st["agent"]["disk"]
    assert st["agent"]["session_dir"] == str(rp.path)
    assert (disk["ok"], disk["error"], disk["dropped_events"], disk["dropped_samples"]) == (
        True,
        None,
        0,
        0,
    ), disk
    crashed = rp.status_at(T0 + 255)["slots"][0]
    assert crashed["cause"]["kind"] == "cuda"
    assert rp.status_at(T0 + 130)["bench"]["state"] == "running"
    (run,) = rp.bench_runs_at(T0 + 255)
    assert run["state"] == "done" and run["path"] == str(rp.path / "bench" / "b1.json")


def test_pushes_in_steps_equal_pushes_at_once(rp):
    whole = rp.pushes_between(rp.start - 1, rp.end)
    stepped = []
    t = rp.start - 1
    while t < rp.end:
        stepped += rp.pushes_between(t, t + 7.3)
        t += 7.3
    key = lambda p: (
        p["push"],
        p["data"].get("ts"),
        p["data"].get("type"),
        tuple(p["data"].get("lines") or ()),
    )
    assert sorted(map(key, stepped)) == sorted(map(key, whole))
    kinds = {p["push"] for p in whole}
    assert kinds == {"event", "sample", "log"}
    assert sum(1 for p in whole if p["push"] == "sample") == len(rp.samples) == 261
    times = [p["data"]["ts"] for p in whole if p["push"] != "log"]
    assert times == sorted(times)


def test_log_tail_follows_the_current_launch(rp):
    assert rp.log_tail("0", T0 + 0.5) == []
    first = rp.log_tail("0", T0 + 30)
    assert len(first) == 2 and "api_key='***" in first[0].replace("*" * 18, "***")
    assert builder.API_KEY not in " ".join(first)
    assert rp.log_tail("0", T0 + 255) == [
        "RuntimeError: CUDA error: an illegal memory access was encountered"
    ]


def test_checkpoints_give_the_same_answer(isolated_env, monkeypatch):
    path = builder.build(isolated_env)
    plain = Replay.open(path)
    monkeypatch.setattr(replay_mod, "CHECKPOINT_EVERY", 3)
    chunked = Replay.open(path)
    assert len(chunked._checkpoints) > 5
    for dt in range(0, 261, 13):
        assert chunked.status_at(T0 + dt) == plain.status_at(T0 + dt)


def test_window_rebuilds_chart_history(rp):
    w = rp.window(T0 + 200)
    samples = [p for p in w if p["push"] == "sample"]
    assert len(samples) == 201  # 1 Hz samples in the last 5 min; the session started 200 s before
    assert samples[-1]["data"]["ts"] == T0 + 200 and samples[0]["data"]["ts"] > T0 + 200 - 300
    assert [p for p in w if p["push"] == "event"][-1]["data"]["ts"] <= T0 + 200


def test_parse_seek_forms():
    start = T0 + 0.0
    end, now = start + 4000.0, start + 1000.0
    assert parse_seek("+30", now, start, end) == now + 30
    assert parse_seek("-2m", now, start, end) == now - 120
    assert parse_seek("90", now, start, end) == start + 90
    assert parse_seek("1:30", now, start, end) == start + 90
    # The bar prints positions as "+1:44 / 4:20": typing one back goes there (issue 15).
    assert parse_seek("+1:40", now, start, end) == start + 100
    assert parse_seek("+ 1:00:05", now, start, end) == start + 3605
    mid = start + 3000.0
    clock = time.strftime("%H:%M:%S", time.localtime(mid))
    # h:mm:ss is a clock time when the session covers it, else an offset from the start.
    assert parse_seek(clock, now, start, end) == mid
    off_clock = time.strftime("%H:%M:%S", time.localtime(start + 7200))
    if not (start <= parse_seek("@" + clock, now, start, end) <= end):
        pytest.fail("clock time inside the session not found")
    with pytest.raises(SeekError, match="outside the session"):
        parse_seek("@" + off_clock, now, start, end)
    assert parse_seek("50%", now, start, end) == start + 2000
    assert (
        parse_seek("end", now, start, end) == end and parse_seek("start", now, start, end) == start
    )
    assert parse_seek("+99h", now, start, end) == end  # clamped
    for bad in ("", "soon", "@99:99"):
        with pytest.raises(SeekError):
            parse_seek(bad, now, start, end)
