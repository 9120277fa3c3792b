"""The CLI commands as a user runs them: real `python -m sgltui` processes against a real agent."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.fixtures.cli import agent_sgltui as sgltui


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("sgltui: error:")]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return errors[0]


def test_cli_start_status_logs_swap_stop(agent):
    a, b = agent.write_profile("t-a"), agent.write_profile("t-b")
    r = sgltui(agent, "start", a)
    assert r.returncode == 0, r.stderr + r.stdout
    assert (
        "loading weights" in r.stdout and f"t-a ready on 127.0.0.1:{agent.ports['t-a']}" in r.stdout
    )

    r = sgltui(agent, "status")
    assert r.returncode == 0
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("0 "))
    assert "t-a" in row and "ready" in row and str(agent.ports["t-a"]) in row
    front = f"front: {agent.front_url} (routing -> http://127.0.0.1:{agent.ports['t-a']})"
    assert front in r.stdout, r.stdout

    r = sgltui(agent, "status", "--json")
    st = json.loads(r.stdout)
    slot = st["slots"][0]
    assert slot["state"] == "ready" and slot["pid"] in slot["pids"] and slot["uptime_s"] >= 0
    assert st["agent"]["pid"] == agent.pid
    assert slot["front"]["url"] == agent.front_url and slot["front"]["state"] == "routing"

    r = sgltui(agent, "logs", "-n", "5")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 5

    r = sgltui(agent, "swap", b)
    assert r.returncode == 0, r.stderr
    assert "swap t-a -> t-b: stopping" in r.stdout and "t-b ready" in r.stdout

    r = sgltui(agent, "restart")
    assert r.returncode == 0 and "t-b ready" in r.stdout, r.stderr

    r = sgltui(agent, "stop")
    assert r.returncode == 0 and "stopped" in r.stdout, r.stderr
    assert agent.slot()["state"] == "stopped"


def test_cli_failures_are_one_line_and_nonzero(agent):
    bad = agent.write_profile("t-oom", sim_fail_at_start="oom")
    r = sgltui(agent, "start", bad)
    assert r.returncode == 1
    line = _one_error_line(r)
    assert "out of GPU memory" in line and "fix:" in line
    assert "Capture cuda graph failed" in r.stderr  # the log lines that show it

    r = sgltui(agent, "start", "no-such-profile")
    assert r.returncode == 1 and "no-such-profile" in _one_error_line(r)

    r = sgltui(agent, "stop")
    assert r.returncode == 0 or "not running" in _one_error_line(r)

    a = agent.write_profile("t-a")
    bad2 = agent.write_profile("t-cuda", sim_fail_at_start="cuda")
    assert sgltui(agent, "start", a).returncode == 0
    r = sgltui(agent, "swap", bad2)
    assert r.returncode == 1
    line = _one_error_line(r)
    assert "rolled back to t-a" in line
    assert agent.slot()["state"] == "ready" and agent.slot()["profile"] == "t-a"


def test_cli_agent_status_and_stop(agent_handle):
    agent = agent_handle
    r = sgltui(agent, "agent", "status")
    assert r.returncode == 3 and "not running" in r.stdout
    assert not agent.paths["socket"].exists()  # agent status does not start one

    r = sgltui(agent, "status")  # status does not start one either (it would open a session)
    assert r.returncode == 3 and "no agent is running" in r.stderr
    assert not agent.paths["socket"].exists()
    r = sgltui(agent, "agent", "start")
    assert r.returncode == 0, r.stderr
    pid = agent.wait_pid()
    r = sgltui(agent, "agent", "status")
    assert r.returncode == 0 and f"pid {pid}" in r.stdout

    r = sgltui(agent, "agent", "stop")
    assert r.returncode == 0 and "agent stopped" in r.stdout
    r = sgltui(agent, "agent", "status", "--json")
    assert json.loads(r.stdout)["running"] is False


def test_cli_bad_state_dir_is_one_line(agent_handle, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = subprocess.run(
        [sys.executable, "-m", "sgltui", "--state-dir", str(blocker / "x"), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert r.returncode != 0
    line = _one_error_line(r)
    assert "state dir" in line or "agent" in line


def test_cli_no_wait_start_swap_restart(agent):
    """Issue 18 #2: `--no-wait` crashed with "call_sync() got multiple values for keyword argument
    'profiles_dirs'" on start, swap and restart, with a traceback and nothing sent."""
    a, b = agent.write_profile("t-a"), agent.write_profile("t-b")
    for argv, profile in (("start", a), ("swap", b), ("restart", None)):
        r = sgltui(agent, argv, *([profile] if profile else []), "--no-wait")
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        assert f"slot 0: {argv} accepted" in r.stdout
        ready = agent.wait_state("ready")
        assert ready["profile"] == (profile or b)


def test_status_without_agent_tells_of_servers_left_running(agent):
    """`status` with no agent folds the last session (protocol.apply): servers that an agent
    stopped without --stop-servers left behind are named, and no session is created."""
    a = agent.write_profile("t-a")
    assert sgltui(agent, "start", a).returncode == 0
    ready = agent.wait_state("ready")
    assert sgltui(agent, "agent", "stop").returncode == 0
    sessions = sorted((agent.state_dir / "sessions").iterdir())
    r = sgltui(agent, "status")
    assert r.returncode == 3
    line = _one_error_line(r)
    assert f"slot 0: t-a (ready, pid {ready['pid']})" in line and "agent start" in line
    assert sorted((agent.state_dir / "sessions").iterdir()) == sessions
