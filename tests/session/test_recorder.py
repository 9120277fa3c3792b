"""The session recorder: layout and modes, flush per event, kill -9, disk full, rotation, scrubbing."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from sgltui.session import writer as recorder_mod
from sgltui.session.jsonl import read_jsonl, rotated_parts
from sgltui.session.writer import Recorder, RotationLimit, SessionLimits

KEY = "sk-proj-QkA8f2hx91"


def _mode(path):
    return path.stat().st_mode & 0o777


def test_layout_and_modes_even_with_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        rec = Recorder.create(tmp_path / "state")
        rec.event("agent.start", pid=1)
        rec.sample({"gpus": [], "host": {}, "engine": {}})
        log = rec.server_log_path("20261202-150000-demo")
        bench = rec.bench_path("run/1")
        # Asking for the path must not create the file: the agent picks unused launch ids by
        # testing .exists(). The server's own open() then creates it with the umask's mode.
        assert not log.exists()
        open(log, "ab").close()
        assert _mode(log) == 0o666
        rec.maintain()
    finally:
        os.umask(old)
    assert rec.path.parent == tmp_path / "state" / "sessions"
    for d in (rec.path, rec.path / "servers", rec.path / "bench"):
        assert _mode(d) == 0o700
    for f in (rec.path / "events.jsonl", rec.path / "timeline.jsonl", log):
        assert _mode(f) == 0o600
    assert bench.parent == rec.path / "bench" and "/" not in bench.name
    rec.close()


def test_two_sessions_in_one_second_get_distinct_dirs(tmp_path):
    a = Recorder.create(tmp_path)
    b = Recorder.create(tmp_path)
    assert a.path != b.path


def test_event_shape_and_flush_per_event(tmp_path):
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s")
    ev = rec.event("slot.state", slot="0", client="cli:1@h", state="ready", prev="launching")
    assert (
        ev["v"] == 1
        and ev["type"] == "slot.state"
        and ev["slot"] == "0"
        and ev["client"] == "cli:1@h"
    )
    assert isinstance(ev["ts"], float) and abs(ev["ts"] - time.time()) < 5
    # Readable by another reader immediately, without closing or flushing the recorder.
    records, stats = read_jsonl(tmp_path / "s" / "events.jsonl")
    assert records == [ev] and stats.skipped == 0


def test_events_and_samples_are_redacted_on_disk(tmp_path):
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s")
    ev = rec.event(
        "launch",
        slot="0",
        launch_id="L1",
        command=["python", "-m", "sgltui.sim", "--api-key", KEY],
        env={"HF_TOKEN": "hf_abcdefghij"},
    )
    rec.event("command", op="start", args={"note": f"key {KEY} given"})
    rec.sample({"engine": {"0": {"source": f"http://u:{KEY}@h/metrics"}}})
    assert KEY not in json.dumps(ev)
    for f in ("events.jsonl", "timeline.jsonl"):
        text = (tmp_path / "s" / f).read_text()
        assert KEY not in text and "hf_abcdefghij" not in text
    assert "--api-key" in (tmp_path / "s" / "events.jsonl").read_text()


def test_server_log_scrubbed_in_place_with_same_length(tmp_path):
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s")
    rec.event("launch", slot="0", launch_id="L1", command=["--api-key", KEY])
    log = rec.server_log_path("L1")
    # The server writes through its own O_APPEND descriptor, as the agent spawns it.
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(
        fd, f"[2026-12-02 15:00:00] server_args=ServerArgs(api_key='{KEY}', port=30000)\n".encode()
    )
    os.write(fd, b"half a line with " + KEY[:6].encode())  # no newline yet: left for the next pass
    before = log.stat().st_size
    rec.maintain()
    os.write(fd, KEY[6:].encode() + b" done\n")
    rec.maintain()
    os.close(fd)
    text = log.read_text()
    assert KEY not in text and "port=30000" in text and text.endswith(" done\n")
    assert log.stat().st_size == before + len(KEY) - 6 + len(" done\n")


def test_kill_9_loses_at_most_the_line_being_written(tmp_path):
    sdir = tmp_path / "s"
    code = (
        "import sys\n"
        "from sgltui.session.writer import Recorder\n"
        "r = Recorder.create(None, session_dir=sys.argv[1])\n"
        "i = 0\n"
        "while True:\n"
        "    r.event('tick', n=i, pad='x' * 3000)\n"
        "    i += 1\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(sdir)], start_new_session=True)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            p = sdir / "events.jsonl"
            if p.exists() and p.stat().st_size > 300_000:
                break
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    records, stats = read_jsonl(sdir / "events.jsonl")
    assert len(records) > 50
    assert [r["n"] for r in records] == list(range(len(records)))  # nothing lost but the tail
    assert stats.bad_lines == 0
    # A re-adopting agent continues the session without gluing onto a torn line.
    rec = Recorder.reopen(sdir)
    rec.event("agent.adopt")
    again, stats2 = read_jsonl(sdir / "events.jsonl")
    assert again[: len(records)] == records and again[-1]["type"] == "agent.adopt"
    assert stats2.bad_lines <= 1 and not stats2.torn_tail


class _FullDisk:
    """Replaces os.write in the recorder: optionally writes `partial` bytes, then ENOSPC."""

    def __init__(self, partial: int = 0) -> None:
        self.partial = partial
        self.real = os.write

    def __call__(self, fd, data):
        if self.partial:
            n, self.partial = self.partial, 0
            return self.real(fd, bytes(data[:n]))
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("partial", [0, 7])
def test_disk_full_reports_keeps_serving_and_damages_nothing(tmp_path, monkeypatch, partial):
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s")
    seen = []
    rec.on_disk_change = seen.append
    rec.event("agent.start")
    rec.sample({"ts": 1.0})
    events_before = (tmp_path / "s" / "events.jsonl").read_bytes()

    monkeypatch.setattr(recorder_mod.os, "write", _FullDisk(partial))
    ev = rec.event("launch", slot="0", launch_id="L1")  # must not raise
    assert ev["type"] == "launch"
    rec.sample({"ts": 2.0})
    disk = rec.disk
    assert (
        disk["ok"] is False
        and "No space left on device" in disk["error"]
        and "ENOSPC" in disk["error"]
    )
    assert "free disk space" in disk["error"] and disk["dropped_samples"] == 1
    assert [e["type"] for e in seen] == ["disk.error"]
    assert (tmp_path / "s" / "events.jsonl").read_bytes() == events_before  # partial line cut off

    monkeypatch.undo()
    rec._retry_at = 0  # skip the retry back-off instead of sleeping
    rec.event("slot.state", slot="0", state="ready")
    assert rec.disk["ok"] is True
    records, stats = read_jsonl(tmp_path / "s" / "events.jsonl")
    assert [r["type"] for r in records] == [
        "agent.start",
        "launch",
        "disk.error",
        "disk.ok",
        "slot.state",
    ]
    assert stats.skipped == 0
    assert [e["type"] for e in seen] == ["disk.error", "disk.ok"]


def test_unwritable_session_dir_does_not_raise(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    rec = Recorder.create(blocker)  # sessions/ cannot be made under a regular file
    ev = rec.event("agent.start")
    rec.sample({})
    assert ev["type"] == "agent.start"
    assert rec.disk["ok"] is False and str(blocker) in rec.disk["error"]
    assert rec.server_log_path("L1").name == "L1.log"


def test_event_and_timeline_rotation_is_bounded_and_ordered(tmp_path):
    limits = SessionLimits(
        events=RotationLimit(4096, 2),
        timeline=RotationLimit(4096, 1),
        server_log=RotationLimit(4096, 1),
    )
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s", limits=limits)
    for i in range(200):
        rec.event("tick", n=i, pad="y" * 100)
        rec.sample({"n": i, "pad": "z" * 100})
    parts = rotated_parts(tmp_path / "s" / "events.jsonl")
    assert [p.name for p in parts] == ["events.jsonl.2", "events.jsonl.1", "events.jsonl"]
    assert all(p.stat().st_size <= 4096 for p in parts)
    records, stats = read_jsonl(tmp_path / "s" / "events.jsonl")
    ns = [r["n"] for r in records]
    assert ns == list(range(ns[0], 200)) and stats.skipped == 0 and ns[0] > 0
    assert len(rotated_parts(tmp_path / "s" / "timeline.jsonl")) == 2


def test_server_log_copy_truncate_rotation(tmp_path):
    limits = SessionLimits(server_log=RotationLimit(4096, 1))
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s", limits=limits)
    log = rec.server_log_path("L1")
    with open(log, "ab") as fh:
        fh.write(b"".join(b"line %05d\n" % i for i in range(600)))
        fh.flush()
        rec.maintain()
        fh.write(b"after rotation\n")
    assert log.read_bytes() == b"after rotation\n"
    assert (log.parent / "L1.log.1").read_bytes().startswith(b"line 00000\n")
    records, _ = read_jsonl(tmp_path / "s" / "events.jsonl")
    assert records[-1]["type"] == "log.rotated"


def test_limits_spec_parsing(monkeypatch):
    lim = SessionLimits.parse("events=1M:3, timeline=512K")
    assert lim.events == RotationLimit(1024**2, 3) and lim.timeline.max_bytes == 512 * 1024
    with pytest.raises(ValueError, match="use e.g."):
        SessionLimits.parse("eventz=1M")
    with pytest.raises(ValueError, match="bad size"):
        SessionLimits.parse("events=lots")


def test_bad_limits_env_falls_back_with_a_warning_event(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLTUI_SESSION_LIMITS", "events=huge")
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s")
    assert rec.limits == SessionLimits()
    records, _ = read_jsonl(tmp_path / "s" / "events.jsonl")
    assert (
        records[0]["type"] == "session.warning" and "SGLTUI_SESSION_LIMITS" in records[0]["message"]
    )


def test_reopen_scrubs_lines_written_while_no_agent_watched(tmp_path):
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s")
    rec.add_secret(KEY)
    log = rec.server_log_path("L1")
    bench_log = rec.bench_path("b1").with_suffix(".log")
    rec.close()
    # The agent died; the server (and a bench runner) kept writing.
    log.write_text(f"--api-key {KEY}\n")
    bench_log.write_text(f"Authorization: Bearer {KEY}\n")
    again = Recorder.reopen(tmp_path / "s")
    again.maintain()
    assert KEY not in log.read_text() and KEY not in bench_log.read_text()
    assert log.read_text().startswith("--api-key ***")


def test_real_write_limit_in_a_child_process(tmp_path):
    """The kernel refuses writes past RLIMIT_FSIZE (EFBIG, after a short write at the limit):
    a real partial write and a real error, without needing a full disk."""
    code = (
        "import json, resource, sys\n"
        "from sgltui.session.writer import Recorder\n"
        "r = Recorder.create(None, session_dir=sys.argv[1])\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))\n"
        "for i in range(100):\n"
        "    r.event('tick', n=i, pad='p' * 701)\n"
        "print(json.dumps(r.disk))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert out.returncode == 0, out.stderr
    disk = json.loads(out.stdout)
    assert disk["ok"] is False and "EFBIG" in disk["error"] and "ulimit -f" in disk["error"]
    data = (tmp_path / "s" / "events.jsonl").read_bytes()
    assert len(data) <= 20000 and data.endswith(b"\n")  # the cut line was removed again
    records, stats = read_jsonl(tmp_path / "s" / "events.jsonl")
    assert (
        stats.skipped == 0
        and [r["n"] for r in records] == list(range(len(records)))
        and len(records) > 10
    )


def test_scrub_catches_up_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_mod, "SCRUB_CHUNK", 1000)
    rec = Recorder.create(tmp_path, session_dir=tmp_path / "s")
    rec.add_secret(KEY)
    log = rec.server_log_path("L1")
    log.write_text("".join(f"line {i} {KEY}\n" for i in range(200)) + "x" * 2500 + "\n")
    for _ in range(20):
        rec.maintain()
    assert KEY not in log.read_text() and log.read_text().count("line ") == 200
