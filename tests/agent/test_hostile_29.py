"""Hostile input against a real agent, issue 29 (F8, F9, hello): each case failed before its fix
(a gaierror traceback in agent.log; HF_TOKEN in clear in agent-state.json; ops answered on a
connection that never said hello)."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from sgltui.agent.client import AgentError
from sgltui.cli import main


def test_a_host_that_is_not_an_address_is_refused_in_one_line(agent, capsys):
    """F9: `host = "$(id)"` was `internal error in start: gaierror` and a traceback."""
    name = agent.write_profile("t-host", host="$(id)")
    with pytest.raises(AgentError) as exc:
        agent.call("start", profile=name, wait=True)
    line = str(exc.value)
    assert "host" in line and "$(id)" in line and "not an IP address or a host name" in line
    assert "internal error" not in line and "gaierror" not in line and "\n" not in line
    capsys.readouterr()
    assert main(["--state-dir", str(agent.state_dir), "start", name]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not an IP address or a host name" in err[0], err
    assert "Traceback" not in agent.agent_log() and "gaierror" not in agent.agent_log()
    assert agent.slot()["state"] == "stopped"


SECRET_ENV = {
    "HF_TOKEN": "hf_0123456789abcdef",
    "WANDB_API_KEY": "wb-0123456789abcdef",
    "MY_SECRET": "s3cr3t-0123456789",
}


def _kill9_and_readopt(agent) -> None:
    old = agent.pid
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.pid_exists(old) and psutil.Process(old).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the agent outlived kill -9"
        time.sleep(0.05)
    agent.call("status", autostart=True)  # the keeper's new agent, or one started now
    assert agent.wait_pid() != old


def test_env_secrets_never_reach_agent_state_and_a_readopted_rollback_keeps_them(agent):
    """F8: HF_TOKEN (and any *_KEY, *_SECRET) was written in clear to agent-state.json. The
    re-adopting agent still relaunches exactly what ran: here the file has lost its secrets
    since (so its values cannot come from there), and a failed swap rolls back to the
    re-adopted profile, whose server gets the values the running one had."""
    env = {**SECRET_ENV, "HF_HOME": "/tmp/hf-home"}
    a = agent.write_profile("t-env", env=env)
    agent.call("start", profile=a, wait=True)
    state = agent.state_dir / "agent-state.json"
    text = state.read_text()
    assert "/tmp/hf-home" in text, "what is not a secret is kept"
    for value in SECRET_ENV.values():
        assert value not in text, f"{value} in agent-state.json"
    agent.write_profile("t-env", env={"HF_HOME": "/tmp/hf-home"})  # same port, no secrets
    _kill9_and_readopt(agent)
    agent.wait_state("ready")
    bad = agent.write_profile("t-oom", sim_fail_at_start="oom")
    res = agent.call("swap", profile=bad, wait=True)
    assert res["result"]["rolled_back"] is True, res
    slot = res["slot"]
    assert slot["state"] == "ready" and slot["profile"] == "t-env"
    ran = psutil.Process(slot["pid"]).environ()
    assert {k: ran.get(k) for k in env} == env
    for value in SECRET_ENV.values():
        assert value not in state.read_text()
