"""What must survive: many swaps, dying clients, a dying agent, stale files, SIGHUP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from sgltui.client import AgentError, call_sync
from tests.fixtures.agent import alive


def _group_members(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and alive(p.pid):
                out.append(p.pid)
        except OSError:
            pass
    return out


def test_twenty_swaps_leave_no_process_behind(agent):
    # SGLang's own switch for "exit at once on SIGTERM": this test is about what is left behind,
    # not about graceful shutdown, and it keeps 20 swaps within seconds each.
    fast = {"SGL_FORCE_SHUTDOWN": "1"}
    a, b = agent.write_profile("t-a", env=fast), agent.write_profile("t-b", env=fast)
    slot = agent.call("start", profile=a, wait=True)["slot"]
    seen: dict[int, int] = {}  # every server pid -> its process group
    for pid in slot["pids"]:
        seen[pid] = os.getpgid(pid)
    for i in range(20):
        target = b if i % 2 == 0 else a
        res = agent.call("swap", profile=target, wait=True, drain="force")
        slot = res["slot"]
        assert slot["state"] == "ready" and slot["profile"] == target, res
        for pid in slot["pids"]:
            seen[pid] = os.getpgid(pid)
        current = set(slot["pids"])
        leftovers = [p for p in seen if p not in current and alive(p)]
        assert leftovers == [], f"swap {i}: earlier servers still alive: {leftovers}"
    agent.call("stop", wait=True)
    assert [p for p in seen if alive(p)] == []
    assert [g for g in set(seen.values()) if _group_members(g)] == []
    assert len(agent.events("swap.done")) == 20
    assert len({e["launch_id"] for e in agent.events("launch")}) == 21  # a distinct log per launch


def test_kill9_of_a_client_changes_nothing(agent):
    a, b = agent.write_profile("t-a"), agent.write_profile("t-b")
    agent.call("start", profile=a, wait=True)
    # A CLI swap, killed -9 while it is waiting for the new server.
    cli = subprocess.Popen(
        [sys.executable, "-m", "sgltui", "--profiles", str(agent.profiles_dir), "swap", b],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not agent.events("swap.step"):
            time.sleep(0.05)
        assert agent.events("swap.step"), "the CLI swap never reached the agent"
        os.killpg(cli.pid, signal.SIGKILL)
    finally:
        cli.wait(timeout=10)
    slot = agent.wait_state("ready", timeout=60)
    assert slot["profile"] == "t-b"
    done = agent.events("swap.done")[-1]
    assert done["ok"] and done["client"].startswith("cli:")
    assert agent.call("ping")["pong"]


def test_kill9_of_the_agent_then_readopt_same_session(agent):
    a = agent.write_profile("t-a")
    slot = agent.call("start", profile=a, wait=True)["slot"]
    session = agent.status()["agent"]["session_dir"]
    old_pid = agent.pid
    os.kill(old_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(old_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(old_pid)
    assert all(alive(p) for p in slot["pids"]), "the server must outlive the agent"
    assert agent.paths["socket"].exists()  # stale socket left by the dead agent

    # Any command starts a new agent, which cleans the stale socket and re-adopts the server.
    st = agent.call("status", autostart=True)
    agent.wait_pid()
    new = st["slots"][0]
    assert st["agent"]["pid"] != old_pid
    assert st["agent"]["session_dir"] == session
    assert (
        new["state"] == "ready"
        and new["pid"] == slot["pid"]
        and new["launch_id"] == slot["launch_id"]
    )
    adopt = agent.events("agent.adopt")
    assert adopt and adopt[-1]["ok"] and adopt[-1]["pid"] == slot["pid"]
    starts = agent.events("agent.start")
    assert len(starts) == 2 and starts[-1]["reopened"] is True

    # The adopted server is fully managed: it crashes -> cause; stop works; swap works.
    b = agent.write_profile("t-b")
    res = agent.call("swap", profile=b, wait=True)
    assert res["slot"]["state"] == "ready" and res["slot"]["profile"] == "t-b"
    assert [p for p in slot["pids"] if alive(p)] == []


def test_agent_stop_leaves_servers_then_next_agent_adopts(agent):
    a = agent.write_profile("t-a")
    slot = agent.call("start", profile=a, wait=True)["slot"]
    old = agent.pid
    agent.call("shutdown")
    deadline = time.monotonic() + 15
    while alive(old) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(old) and not agent.paths["socket"].exists() and not agent.paths["pid"].exists()
    assert all(alive(p) for p in slot["pids"])
    st = agent.call("status", autostart=True)
    agent.wait_pid()
    assert st["slots"][0]["state"] == "ready" and st["slots"][0]["pid"] == slot["pid"]
    stops = agent.events("agent.stop")
    assert stops and stops[-1]["left_running"] == ["0"]


def test_one_agent_per_state_dir_and_sighup_survival(agent):
    first = agent.pid
    # A second launch for the same state dir backs off: the lock is held.
    from sgltui.client import spawn_agent

    spawn_agent(agent.state_dir, [agent.profiles_dir])
    time.sleep(1.0)
    procs = [
        (p.pid, p.info["cmdline"] or [])
        for p in psutil.process_iter(["cmdline"])
        if "sgltui.agent" in " ".join(p.info["cmdline"] or [])
        and str(agent.state_dir) in " ".join(p.info["cmdline"] or [])
    ]
    # one agent, and one keeper (agent/keeper.py) that is its parent
    assert [pid for pid, argv in procs if "--kept" in argv] == [first]
    keepers = [pid for pid, argv in procs if "--kept" not in argv]
    assert keepers == [psutil.Process(first).ppid()]
    os.kill(first, signal.SIGHUP)
    time.sleep(0.3)
    assert alive(first) and agent.call("ping")["pid"] == first
    # Detached: its own session, not a child of this test.
    proc = psutil.Process(first)
    assert os.getsid(first) != os.getsid(0) and proc.ppid() != os.getpid()


def test_stale_pid_and_socket_files_are_cleaned(agent_handle):
    agent = agent_handle
    agent.state_dir.mkdir(parents=True, exist_ok=True)
    agent.paths["pid"].write_text("999999\n")
    agent.paths["socket"].write_text("")  # not even a socket
    with pytest.raises(AgentError, match="no agent is running"):
        call_sync(agent.state_dir, "status", autostart=False)
    pid = agent.start()
    assert int(agent.paths["pid"].read_text()) == pid


def test_bad_requests_get_one_line_errors(agent):
    with pytest.raises(AgentError, match="unknown op 'frobnicate'"):
        agent.call("frobnicate")
    with pytest.raises(
        AgentError, match=r"drain: invalid enum value .maybe. \(one of: wait, force\)"
    ):
        agent.call("stop", drain="maybe")
    with pytest.raises(AgentError, match="no slot '7'"):
        agent.call("start", profile="x", slot="7")
    # A raw garbage line does not take the agent down.
    import socket as so

    s = so.socket(so.AF_UNIX)
    s.connect(str(agent.paths["socket"]))
    s.sendall(b"this is not json\n")
    reply = json.loads(s.makefile().readline())
    s.close()
    assert reply["ok"] is False and "JSON" in reply["error"]
    assert agent.call("ping")["pong"]


async def test_subscribe_streams_events_and_log_lines(agent):
    a = agent.write_profile("t-a")
    async with agent.client("viewer") as viewer, agent.client("driver") as driver:
        await viewer.call("subscribe")
        await driver.call("start", profile=a)
        kinds, events, logs = set(), [], []
        async for msg in viewer.pushes():
            kinds.add(msg["push"])
            if msg["push"] == "event":
                events.append(msg["data"])
                if msg["data"]["type"] == "slot.state" and msg["data"]["state"] == "ready":
                    break
            elif msg["push"] == "log":
                logs += msg["data"]["lines"]
        assert {"event", "log"} <= kinds
        assert any("Load weight begin" in ln for ln in logs)
        ready = events[-1]
        assert ready["client"].startswith("driver:") and ready["slot"] == "0"


def test_kill9_of_an_adopted_server_says_killed_by_a_signal(agent):
    a = agent.write_profile("t-adopt-kill")
    slot = agent.call("start", profile=a, wait=True)["slot"]
    agent.kill9()
    st = agent.status()
    assert st["slots"][0]["state"] == "ready" and st["slots"][0]["pid"] == slot["pid"]
    os.killpg(os.getpgid(slot["pid"]), signal.SIGKILL)
    crashed = agent.wait_state("crashed", timeout=30)
    cause = crashed["cause"]
    assert cause["kind"] == "signal" and "unknown exit status" not in cause["summary"], cause
    assert "SIGKILL" in cause["summary"], cause
