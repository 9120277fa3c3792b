"""Hostile input against a real agent, issue 29 (F8, F9, hello): each case failed before its fix
(a gaierror traceback in agent.log; HF_TOKEN in clear in agent-state.json; ops answered on a
connection that never said hello)."""

from __future__ import annotations

import json
import socket

import psutil
import pytest

from sgltui import __version__, protocol
from sgltui.cli import main
from sgltui.client import AgentError


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
    agent.kill9()
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


def _ask(reader, sock, op: str, rid: int = 1, **args) -> dict:
    sock.sendall(json.dumps({"id": rid, "op": op, "args": args}).encode() + b"\n")
    return json.loads(reader.readline())


HELLO = {"version": __version__, "protocol": protocol.PROTOCOL_VERSION}


def test_ops_before_hello_are_refused(agent):
    """An op on a connection that never said hello was answered (a client of another version
    would act on replies it may misread)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(agent.paths["socket"]))
        r = s.makefile("rb")
        for op in ("status", "job_list", "profiles"):
            reply = _ask(r, s, op)
            assert reply["ok"] is False, (op, reply)
            assert "hello" in reply["error"] and "\n" not in reply["error"]
        # What finds and stops an agent of any version is answered whatever the versions.
        assert _ask(r, s, "ping")["ok"] is True
        wrong = _ask(r, s, "hello", version="0.0.1-old", protocol=1)
        assert wrong["ok"] is False and "agent stop" in wrong["error"]
        assert _ask(r, s, "status")["ok"] is False, "a hello that did not agree opens nothing"
        assert _ask(r, s, "hello", **HELLO)["ok"] is True
        assert _ask(r, s, "status")["ok"] is True
    with socket.socket(socket.AF_UNIX) as s:  # pipelined behind the hello: judged after it
        s.settimeout(30)
        s.connect(str(agent.paths["socket"]))
        lines = [{"id": 1, "op": "hello", "args": HELLO}, {"id": 2, "op": "status", "args": {}}]
        s.sendall(b"".join(json.dumps(x).encode() + b"\n" for x in lines))
        r = s.makefile("rb")
        replies = {m["id"]: m for m in (json.loads(r.readline()) for _ in lines)}
        assert replies[1]["ok"] and replies[2]["ok"], replies
    assert "Traceback" not in agent.agent_log()
