"""Hostile input against a real agent, issue 29 (F8, F9, hello): each case failed before its fix
(a gaierror traceback in agent.log; HF_TOKEN in clear in agent-state.json; ops answered on a
connection that never said hello)."""

from __future__ import annotations

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
