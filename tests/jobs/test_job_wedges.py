"""Jobs that cannot go on say so at once and go on by themselves (issue 29: F3, F4, item 3).

Real agent, real simulator, real runner. The full and read-only disks are tmpfs mounts (needs the
right to mount: root, as in CI containers; skipped otherwise).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sgltui.client import AgentError
from sgltui.protocol import JobState, JobView
from sgltui.tui.widgets.jobs import render_job
from tests.fixtures.cli import agent_sgltui as sgltui
from tests.jobs.batch_input import read_output, write_input


def _wait_job(agent, pred, what: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    view = None
    while time.monotonic() < deadline:
        with contextlib.suppress(AgentError):
            view = agent.call("job_status")
            if pred(view):
                return view
        time.sleep(0.05)
    raise AssertionError(f"job never reached {what}: {view}\n{agent.agent_log()}")


@contextlib.contextmanager
def _tmpfs(path: Path, opts: str):
    path.mkdir()
    rc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True
    ).returncode
    if rc != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(path: Path) -> None:
    with open(path, "wb") as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()


def _verify(inp: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sgltui", "job", "verify", str(inp), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_output_in_a_read_only_directory_is_one_line_at_once(agent, tmp_path):
    """F4: the runner used to crash on OUTPUT.lock while `job run` waited 600 s."""
    inp = tmp_path / "in.jsonl"
    write_input(inp, 10)
    with _tmpfs(tmp_path / "ro", "size=1m,ro") as ro:
        t0 = time.monotonic()
        r = sgltui(agent, "job", "run", str(inp), "-o", str(ro / "out.jsonl"), "--no-wait")
        took = time.monotonic() - t0
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    errors = r.stderr.strip().splitlines()
    assert errors == [f"sgltui: error: cannot write in {ro} (read-only); choose another -o"]
    assert took < 15, took  # the time of a CLI start, not of a check that never comes
    assert agent.call("job_list") == []  # nothing was started


def test_a_full_disk_says_disk_full_at_once_and_the_job_resumes_by_itself(agent, tmp_path):
    """F3: the job stayed 'running' with stale figures and never resumed."""
    a = agent.write_profile("w-full")
    agent.call("start", profile=a, wait=True)
    inp = tmp_path / "in.jsonl"
    ids = write_input(inp, 3000, max_tokens=8)
    with _tmpfs(tmp_path / "small", "size=4m,mode=0700") as small:
        out = small / "out.jsonl"
        agent.call("job_run", input=str(inp), output=str(out), concurrency=16)
        _wait_job(agent, lambda v: v["answered"] >= 300, "300 answered")
        _fill(small / "filler")
        t0 = time.monotonic()
        v = _wait_job(agent, lambda v: v["state"] == "waiting", "waiting on the full disk", 10)
        said = time.monotonic() - t0
        assert v["waiting_for"].startswith(f"disk full: cannot write {out}"), v
        assert v["completions_s"] == 0 and v["eta_s"] is None, v  # no stale figures
        assert said < 5, said
        print(f"\ndisk full said {said:.2f}s after the disk filled")
        time.sleep(1.0)
        held = agent.call("job_status")
        assert held["state"] == "waiting" and held["answered"] == v["answered"], held
        ev = agent.events("job.disk_error")
        assert ev and ev[-1]["message"].startswith("disk full:"), ev
        r = sgltui(agent, "job", "status")
        assert "disk full: cannot write" in r.stdout, r.stdout

        os.unlink(small / "filler")  # space comes back: no command typed
        final = _wait_job(agent, lambda v: v["state"] == "done", "done", 120)
        assert final["answered"] == 3000 and final["failed"] == 0, final
        assert agent.events("job.disk_ok")
        counts = Counter(line["custom_id"] for line in read_output(out))
        assert set(counts) == set(ids) and max(counts.values()) == 1
        r = _verify(inp, out)
        assert r.returncode == 0, r.stdout + r.stderr


def test_a_job_with_no_answers_while_its_server_is_ready_says_stalled(
    agent_handle, tmp_path, monkeypatch
):
    """Item 3: SIGSTOP wedges the server (the slot stays ready, requests hang)."""
    monkeypatch.setenv("SGLTUI_JOB_STALL_S", "2")
    agent = agent_handle
    agent.start()
    a = agent.write_profile("w-stall", time_scale=0.1, sim_slow_start=0.1)  # in flight for sure
    slot = agent.call("start", profile=a, wait=True)["slot"]
    inp = tmp_path / "in.jsonl"
    write_input(inp, 2000, max_tokens=8)
    agent.call("job_run", input=str(inp), output=str(tmp_path / "out.jsonl"), concurrency=8)
    _wait_job(agent, lambda v: v["answered"] >= 100, "100 answered")
    pgid = os.getpgid(slot["pid"])
    os.killpg(pgid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        v = _wait_job(agent, lambda v: v["stalled"] is not None, "stalled", 20)
        took = time.monotonic() - t0
        # the stall watch's line, or (issue 35) the slot's own word that its server is stopped
        assert v["stalled"].startswith("stalled: "), v
        assert "slot 0's server (w-stall)" in v["stalled"], v
        assert (
            "requests in flight get no answer" in v["stalled"]
            or "is unresponsive: its process" in v["stalled"]
        ), v
        # The figure (SGLTUI_JOB_STALL_S plus the 1 s tick) is printed, not asserted: a loaded
        # machine's late tick must not fail the suite.
        print(f"\nstall detected {took:.2f}s after SIGSTOP with stall_s = 2")
        r = sgltui(agent, "job", "status")
        assert "stalled: " in r.stdout, r.stdout
        ev = agent.events("job.stalled")  # the session says it too
        assert ev and ev[-1]["message"] == v["stalled"]
        assert "stalled: " in render_job(JobView(**_view_fields(v)))  # the Jobs pane
    finally:
        os.killpg(pgid, signal.SIGCONT)
    v = _wait_job(agent, lambda v: v["stalled"] is None and v["answered"] > 100, "unstalled")
    assert agent.events("job.stall_over")
    r = sgltui(agent, "report")  # the session's report tells it, in order
    assert r.returncode == 0, r.stderr
    stalled = [ln for ln in r.stdout.splitlines() if "stalled: " in ln]
    assert stalled and stalled[0].startswith("- ") and "answers again" in r.stdout, r.stdout
    _wait_job(agent, lambda v: v["state"] == JobState.DONE, "done", 120)


def test_a_stopped_server_shows_unresponsive_and_the_job_names_it(agent_handle, tmp_path):
    """Issue 35: a SIGSTOPped server was called stalled by the job after 63 s while its slot
    showed ready. The slot says unresponsive (and why) within 15 s, and the job names it, with
    the default stall_s (60 s); SIGCONT and it answers again."""
    agent = agent_handle
    agent.start()
    a = agent.write_profile("w-stop", time_scale=0.1, sim_slow_start=0.1)
    slot = agent.call("start", profile=a, wait=True)["slot"]
    inp = tmp_path / "in.jsonl"
    write_input(inp, 2000, max_tokens=8)
    agent.call("job_run", input=str(inp), output=str(tmp_path / "out.jsonl"), concurrency=8)
    _wait_job(agent, lambda v: v["answered"] >= 100, "100 answered")
    pgid = os.getpgid(slot["pid"])
    os.killpg(pgid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        while not (s := agent.slot())["unresponsive"]:
            assert time.monotonic() - t0 < 15, s
            time.sleep(0.2)
        shown = time.monotonic() - t0
        assert s["state"] == "ready" and "SIGSTOP" in s["unresponsive"], s
        v = _wait_job(agent, lambda v: v["stalled"] is not None, "stalled", 15 - shown)
        named = time.monotonic() - t0
        assert "is unresponsive" in v["stalled"] and "kill -CONT" in v["stalled"], v
        print(f"\nunresponsive shown {shown:.1f}s, named by the job {named:.1f}s after SIGSTOP")
        r = sgltui(agent, "status")
        assert "unresponsive" in r.stdout, r.stdout
    finally:
        os.killpg(pgid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while agent.slot()["unresponsive"]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    _wait_job(agent, lambda v: v["stalled"] is None, "unstalled")


def _view_fields(v: dict) -> dict:
    import msgspec

    return msgspec.structs.asdict(msgspec.convert(v, JobView))
