"""A corrupt agent-state.json (issue 35 F4): the bad file is kept aside, the agent's own servers
and gateways are found another way (their log relay's command line and the session's
events; a gateway's open log) and re-adopted or ended, and agent.log says what was done. Before, a new
session started without a word and the servers ran on unmanaged, holding GPUs and ports."""

from __future__ import annotations

import os
import signal
import time

import pytest

from sgltui.agent.pools import gateway
from tests.agent import test_pool
from tests.agent.test_pool import _pool, _pool_call, _wait_workers
from tests.fixtures.agent import alive

pool_agent = test_pool.pool_agent  # the fixture: a pool of two (a, b) on the real smg


def _kill_agent(agent) -> None:
    pid = agent.pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pid):
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.timeout(120)
def test_a_corrupt_state_file_is_kept_aside_and_the_server_readopted(agent_handle, monkeypatch):
    monkeypatch.setenv("SGLTUI_KEEPER", "0")  # the test restarts the agent itself
    agent = agent_handle
    agent.start()
    a = agent.write_profile("t-a")
    agent.call("start", profile=a, wait=True)
    pid = agent.slot()["pid"]
    _kill_agent(agent)
    state = agent.state_dir / "agent-state.json"
    state.write_text("garbage{{")
    agent.start()
    slot = agent.wait_state("ready")
    assert slot["pid"] == pid and slot["profile"] == a, slot
    aside = list(agent.state_dir.glob("agent-state.json.bad-*"))
    assert aside and aside[0].read_text() == "garbage{{"
    log = agent.agent_log()
    assert "kept aside as agent-state.json.bad-" in log and f"pid {pid}" in log, log[-3000:]
    # and it is managed: a stop stops it
    agent.call("stop", wait=True)
    assert not alive(pid)


@pytest.mark.timeout(150)
@pytest.mark.skipif(not gateway.smg_available(), reason="smg not installed")
def test_a_gateway_whose_pid_file_is_corrupt_is_found_by_its_open_log(pool_agent, monkeypatch):
    monkeypatch.setenv("SGLTUI_KEEPER", "0")
    agent = pool_agent
    a = agent.write_profile("t-a")
    agent.start()
    _pool_call(agent, "start", profile=a, pool="all", wait=True)
    old_gw = _wait_workers(agent, ["ready", "ready"])["gateway"]["pid"]
    _kill_agent(agent)
    (agent.state_dir / "agent-state.json").write_text("[" * 100_000)
    (agent.state_dir / "gateways" / "all.pid").write_text("garbage{{")
    agent.start()
    pool = _wait_workers(agent, ["ready", "ready"], timeout=60)
    assert pool["gateway"]["state"] == "running", pool
    assert not alive(old_gw) or pool["gateway"]["pid"] == old_gw
    slots = agent.status()["slots"]
    assert [s["state"] for s in slots] == ["ready", "ready"]
    # two slots started in one second on one profile: each its own launch and log
    assert slots[0]["launch_id"] != slots[1]["launch_id"], slots
    assert "found by its open log" in agent.agent_log()
    from tests.fixtures.cli import agent_sgltui

    new_gw = _pool(agent)["gateway"]["pid"]
    r = agent_sgltui(agent, "agent", "stop", "--stop-servers")
    assert r.returncode == 0, r.stderr
    assert not alive(new_gw) and not alive(old_gw)
