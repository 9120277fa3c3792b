"""The agent comes back by itself (issue 29, item 1) and `agent stop` leaves nothing behind (F2).

A real agent under its real keeper (agent/keeper.py), killed with SIGKILL as the OOM killer does:
no command is typed until the test checks what came back.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time

import psutil
import pytest

from sgltui.agent import keeper
from tests.fixtures.agent import alive
from tests.fixtures.cli import agent_sgltui as sgltui

# Issue 29's 5 s is measured by bench/bench_comeback.py (no timing asserts in tests: CI is
# loaded); here the new agent must come by itself, well inside the wait.
BACK_WITHIN_S = 20.0


def _ours(state_dir) -> list[int]:
    """Every process whose command line names this test's state dir (agents and keepers)."""
    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(state_dir) in " ".join(p.info["cmdline"] or []) and alive(p.pid)
    ]


def test_kill9_of_the_agent_a_new_one_serves_by_itself_and_readopts(agent):
    a = agent.write_profile("k-a")
    slot = agent.call("start", profile=a, wait=True)["slot"]
    t0 = time.monotonic()
    agent.kill9()
    took = time.monotonic() - t0
    assert took < BACK_WITHIN_S, f"the agent came back in {took:.1f}s"
    st = agent.status()
    back = st["slots"][0]
    assert back["state"] == "ready" and back["pid"] == slot["pid"], back  # re-adopted
    kept = st["agent"]["keeper"]
    assert kept["restarts"] == 1 and "SIGKILL" in kept["last_exit"], kept
    assert "killed by SIGKILL" in agent.agent_log()
    r = sgltui(agent, "status")
    assert "started the agent again 1 time(s); last: killed by SIGKILL" in r.stdout, r.stdout


def test_a_crash_loop_backs_off_says_why_and_a_command_cuts_the_wait(agent_handle, monkeypatch):
    agent = agent_handle
    monkeypatch.setenv("SGLTUI_KEEPER_BACKOFF_FIRST_S", "30")  # the keeper reads it at start
    first = agent.start()
    second = agent.kill9(pid=first)  # crash 1: started again at once
    os.kill(second, signal.SIGKILL)  # crash 2 in a row: 30 s of back-off
    deadline = time.monotonic() + 10
    while (keeper.read_state(agent.state_dir) or {}).get("state") != "backoff":
        assert time.monotonic() < deadline, keeper.read_state(agent.state_dir)
        time.sleep(0.05)
    r = sgltui(agent, "agent", "status")
    assert r.returncode == 3
    assert "it crashed 2 times in a row (last: killed by SIGKILL" in r.stdout, r.stdout
    wait = re.search(r"starts it again in (\d+)s, or now on any command", r.stdout)
    assert wait and 0 < int(wait.group(1)) <= 30, r.stdout  # counting down from the 30 s
    r = sgltui(agent, "status")
    assert "it crashed 2 times in a row" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "crash 2 in a row, starting a new one in 30s" in agent.agent_log()
    # A command that needs the agent wakes the keeper instead of waiting out the back-off.
    t0 = time.monotonic()
    pid = agent.call("ping", autostart=True)["pid"]
    assert pid not in (first, second) and time.monotonic() - t0 < 15
    agent.agent_pids.add(pid)


def test_agent_stop_stops_the_keeper_too(agent):
    keeper_pid = keeper.keeper_pid(agent.state_dir)
    assert keeper_pid is not None and psutil.Process(agent.pid).ppid() == keeper_pid
    r = sgltui(agent, "agent", "stop")
    assert r.returncode == 0 and "agent stopped" in r.stdout, r.stderr
    assert _ours(agent.state_dir) == []


def test_agent_stop_stop_servers_with_a_dead_agent_stops_its_servers(agent):
    """F2: the agent (and its keeper) died; its servers are in agent-state.json."""
    a = agent.write_profile("k-f2")
    slot = agent.call("start", profile=a, wait=True)["slot"]
    os.kill(keeper.keeper_pid(agent.state_dir) or 0, signal.SIGKILL)
    os.kill(agent.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(agent.pid):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert json.loads((agent.state_dir / "agent-state.json").read_text())["slots"]["0"]

    r = sgltui(agent, "agent", "stop")  # without --stop-servers: says what runs and how
    assert r.returncode == 0
    assert f"its servers are still running (slot 0: k-f2 (pid {slot['pid']}))" in r.stdout
    assert "`sgltui agent stop --stop-servers` stops them" in r.stdout, r.stdout
    assert all(alive(p) for p in slot["pids"])

    r = sgltui(agent, "agent", "stop", "--stop-servers")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "agent stopped; servers stopped", r.stdout
    assert [p for p in slot["pids"] if alive(p)] == []
    assert _ours(agent.state_dir) == []


@pytest.mark.slow
def test_install_service_writes_a_user_unit_that_leaves_the_servers_running(tmp_path):
    import shutil
    import subprocess
    import sys

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "sgltui", "--state-dir", str(tmp_path / "st"), *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )

    r = run("agent", "install-service", "--print")
    assert r.returncode == 0, r.stderr
    unit = r.stdout
    assert f"-m sgltui.agent --state-dir {tmp_path / 'st'} --kept" in unit  # systemd keeps it
    assert "Restart=on-failure" in unit and "KillMode=process" in unit, unit
    r = run("agent", "install-service")
    if shutil.which("systemctl") is None:
        assert r.returncode != 0 and r.stderr.count("\n") == 1 and "no systemd here" in r.stderr
        return
    assert r.returncode == 0, r.stderr
    path = tmp_path / "config" / "systemd" / "user" / "sgltui-agent.service"  # XDG_CONFIG_HOME
    assert path.read_text() == unit and f"wrote {path}" in r.stdout


def test_an_agent_that_cannot_start_is_retried_and_its_reason_is_in_the_log(agent, tmp_path):
    """A bad agent.toml written while the agent ran: the kept agent's start fails with a line
    nobody's terminal sees; agent.log has it, and the keeper's line for the exit."""
    conf = tmp_path / "config" / "sgltui" / "agent.toml"  # XDG_CONFIG_HOME of the test
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text("no_such_setting = 1\n")
    os.kill(agent.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while "exited with code 2" not in agent.agent_log():
        assert time.monotonic() < deadline, agent.agent_log()
        time.sleep(0.1)
    log = agent.agent_log()
    assert "ERROR sgltui.agent: " in log and "no_such_setting: unknown setting" in log, log
    conf.unlink()  # fixed: a command wakes the keeper, which starts it now
    pid = agent.call("ping", autostart=True)["pid"]
    agent.agent_pids.add(pid)
    assert agent.status()["agent"]["keeper"]["restarts"] >= 2
