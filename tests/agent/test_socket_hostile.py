"""The agent's socket against hostile clients (issue 18 #4, #5; issue 14's version check).

A real agent; raw unix sockets so that the client library's own checks are not in the way."""

from __future__ import annotations

import json
import os
import random
import socket
import time
from typing import Any

import psutil
import pytest

from sgltui import __version__, protocol
from sgltui.client import AgentError, call_sync

FUZZ_MESSAGES = 1200
FUZZ_SEED = 14_18


def _connect(agent) -> socket.socket:
    """A raw connection that has said hello (the agent refuses other ops before one agrees:
    tests/agent/test_hostile_29.py), so that what follows reaches the ops themselves."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(str(agent.paths["socket"]))
    hello = {"version": __version__, "protocol": protocol.PROTOCOL_VERSION}
    s.sendall(json.dumps({"id": 0, "op": "hello", "args": hello}).encode() + b"\n")
    reply = b""
    while not reply.endswith(b"\n"):  # read byte by byte: nothing after the reply is consumed
        reply += s.recv(1)
    assert json.loads(reply)["ok"], reply
    return s


def _value(rng: random.Random, depth: int = 0):
    kinds = ["int", "float", "str", "bool", "none", "list", "dict", "bigstr", "neg"]
    if depth > 3:
        kinds = kinds[:5]
    k = rng.choice(kinds)
    if k == "int":
        return rng.randint(-(2**70), 2**70)
    if k == "float":
        return rng.choice([1e308, -0.5, 3.25, 0.0])
    if k == "str":
        return rng.choice(["", "/etc", "maybe", "0", "force", "../..", "\x1b[31m", "x" * 300])
    if k == "bool":
        return rng.random() < 0.5
    if k == "none":
        return None
    if k == "neg":
        return -rng.randint(1, 10**6)
    if k == "bigstr":
        return "é" * rng.randint(1, 5000)
    if k == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(["a", "on", "slot", "x"]): _value(rng, depth + 1) for _ in range(3)}


def _message(rng: random.Random, i: int) -> bytes:
    """One line: garbage, a JSON non-object, deep JSON, or a request with loose arguments."""
    roll = rng.random()
    if roll < 0.1:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))).replace(b"\n", b" ")
    if roll < 0.15:
        return json.dumps(_value(rng)).encode()
    if roll < 0.18:
        n = rng.choice([40, 1000, 100_000])
        return b'{"id": %d, "op": "status", "args": ' % i + b"[" * n + b"]" * n + b"}"
    ops = list(protocol.OPS)
    op = rng.choice([*ops, *ops, "frobnicate", "__init__", "_slot", "", "op_status"])
    spec = protocol.OPS.get(op)
    names = list(spec.args.__struct_fields__) if spec else []
    args = {n: _value(rng) for n in rng.sample(names, k=rng.randint(0, len(names)))}
    if rng.random() < 0.2:
        args[rng.choice(["bogus", "profiles_dirs", "wait"])] = _value(rng)
    req = {"id": i, "op": op, "args": args, "client": _value(rng) if rng.random() < 0.1 else "fz"}
    if rng.random() < 0.05:
        req["args"] = _value(rng)
    if rng.random() < 0.03:
        req["id"] = _value(rng)
    if spec and not spec.read_only:
        try:  # a command that would really run (shutdown, a bench, the demo load) is spoilt
            protocol.parse_args(op, req["args"])
            # (null, [], "" and 0 are read as no arguments: a valid shutdown, once)
            args = req["args"] if isinstance(req["args"], dict) else {}
            req["args"] = {**args, "__not_an_argument__": 1}
        except protocol.ProtocolError:
            pass
    return json.dumps(req).encode()


def test_fuzzed_socket_messages_get_one_line_errors_and_no_traceback(agent):
    rng = random.Random(FUZZ_SEED)
    deadline = time.monotonic() + 90
    sent = errors = 0
    for batch in range(FUZZ_MESSAGES // 100):
        s = _connect(agent)
        reader = s.makefile("rb")
        lines = [_message(rng, batch * 100 + i) for i in range(100)]
        for line in lines:  # one at a time: a reply per line, in order
            s.sendall(line + b"\n")
            while True:  # pushes (a fuzzed `subscribe`) are not replies
                raw = reader.readline()
                assert raw.endswith(b"\n"), f"no reply to {line[:200]!r}"
                reply = json.loads(raw)
                if "push" not in reply:
                    break
            sent += 1
            assert isinstance(reply.get("ok"), bool)
            if not reply["ok"]:
                errors += 1
                err = reply.get("error") or {}  # typed once the hello agreed (protocol.Error)
                assert err.get("code") in protocol.ERROR_CODES, err
                assert err.get("code") != "internal", (line[:300], err)
                text = err.get("message", "")
                assert text and "\n" not in text and "Traceback" not in text, err
            assert time.monotonic() < deadline, f"fuzzing took too long ({sent} messages)"
        s.close()
    assert sent >= 1000 and errors > sent // 2
    assert agent.call("ping")["pong"]
    assert "Traceback" not in agent.paths["log"].read_text()


def test_client_of_another_version_gets_one_line(agent, monkeypatch, capsys):
    monkeypatch.setattr(protocol, "PROTOCOL_VERSION", protocol.PROTOCOL_VERSION + 1)
    with pytest.raises(AgentError) as exc:
        call_sync(agent.state_dir, "status", autostart=False)
    line = str(exc.value)
    assert f"protocol {protocol.PROTOCOL_VERSION - 1}), this is sgltui" in line
    assert "sgltui agent stop" in line and "\n" not in line
    from sgltui.cli import main

    assert main(["--state-dir", str(agent.state_dir), "status"]) != 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0] == f"sgltui: error: {line}"
    # What the line says to do works across versions.
    assert call_sync(agent.state_dir, "ping", autostart=False, check_version=False)["pong"]


# An agent of another release: this checkout's agent, with the package version it reports
# changed before anything imports it (the daemon forks, so the change holds in the agent).
OLD_AGENT = (
    "import sys, runpy, sgltui; sgltui.__version__ = '0.0.1-old'; "
    "sys.argv = ['sgltui.agent', '--state-dir', sys.argv[1]]; "
    "runpy.run_module('sgltui.agent', run_name='__main__', alter_sys=True)"
)


def test_agent_of_another_version_gets_one_line_and_the_fix_works(agent_handle, capsys):
    """Issue 14: an agent left running from another release; every command gets one line that
    says both versions and how to restart the agent, and doing what it says works."""
    import subprocess
    import sys

    from sgltui import __version__
    from sgltui.cli import main

    state = agent_handle.state_dir
    # Without a keeper (an older release had none): the keeper's child would be a fresh
    # interpreter, with this version.
    env = {**os.environ, "SGLTUI_KEEPER": "0"}
    subprocess.run([sys.executable, "-c", OLD_AGENT, str(state)], check=True, timeout=60, env=env)
    deadline = time.monotonic() + 30
    while True:  # found and asked without the version check, as `sgltui agent stop` does
        try:
            old = call_sync(state, "ping", autostart=False, check_version=False)
            break
        except AgentError:
            assert time.monotonic() < deadline, "the old agent did not come up"
            time.sleep(0.1)
    agent_handle.agent_pids.add(old["pid"])
    assert old["version"] == "0.0.1-old"

    with pytest.raises(AgentError) as exc:
        call_sync(state, "status", autostart=True)  # never a second agent beside the old one
    line = str(exc.value)
    assert line.startswith("the agent runs sgltui 0.0.1-old (protocol ")
    assert f"this is sgltui {__version__} (protocol {protocol.PROTOCOL_VERSION})" in line
    assert "`sgltui agent stop`" in line and "\n" not in line
    capsys.readouterr()
    for argv in (["status"], ["job", "list"], ["tui"], []):  # the bare command opens the TUI
        assert main(["--state-dir", str(state), *argv]) != 0
        assert capsys.readouterr().err.splitlines() == [f"sgltui: error: {line}"], argv

    assert main(["--state-dir", str(state), "agent", "stop"]) == 0
    deadline = time.monotonic() + 20
    while _alive_pid(old["pid"]):
        assert time.monotonic() < deadline, "the old agent did not stop"
        time.sleep(0.1)
    assert main(["--state-dir", str(state), "agent", "start"]) == 0  # what the line says next
    new = call_sync(state, "ping", autostart=False)
    agent_handle.agent_pids.add(new["pid"])
    assert new["version"] == __version__ and new["pid"] != old["pid"]


def _alive_pid(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_client_that_never_reads_does_not_stall_the_agent(agent):
    """Issue 18 #4: 5,000 pipelined status requests never read stalled `sgltui status` 14.6 s,
    and 20,000 took the agent's RSS from 42 to 168 MB for good."""
    rss0 = psutil.Process(agent.pid).memory_info().rss
    flood = _connect(agent)
    flood.setblocking(False)
    line = b'{"id": 1, "op": "status"}\n' * 100
    pushed = 0
    try:
        while pushed < 20_000:
            flood.send(line)
            pushed += 100
    except BlockingIOError:
        pass  # the agent stopped reading: backpressure reached this client
    assert pushed < 20_000, "the agent read everything without bound"
    # Another client is answered while the flood connection is still open.
    assert agent.call("status")["agent"]["pid"] == agent.pid
    # The flood connection is dropped once its replies go unread.
    flood.setblocking(True)
    flood.settimeout(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            flood.send(line)
        except (BrokenPipeError, ConnectionResetError):
            break
        except TimeoutError:
            continue
    else:
        raise AssertionError("the agent kept a client that reads nothing")
    flood.close()
    grew = psutil.Process(agent.pid).memory_info().rss - rss0
    assert grew < 40 << 20, f"agent RSS grew by {grew >> 20} MB"
    assert agent.call("ping")["pong"]


@pytest.mark.parametrize(
    ("line", "expect"),
    [
        (b'{"id": 1, "op": "profiles", "args": {"profiles_dirs": "/etc"}}', "profiles_dirs"),
        (b'{"id": 1, "op": "demo_load", "args": {"on": "maybe"}}', "on: expected `bool`"),
        (b'{"id": 1, "op": "timeline", "args": {"series": 5}}', "series: expected"),
        (b'{"id": 1, "op": "status", "args": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", ""),
    ],
    ids=["profiles_dirs-string", "demo_load-maybe", "timeline-series-5", "deep-json"],
)
def test_the_reported_loose_types_are_refused(agent, line, expect):
    """Issue 18 #5, the four cases as reported: a string walked a character at a time, "maybe"
    turned the demo load on, a TypeError traceback, a RecursionError."""
    s = _connect(agent)
    s.sendall(line + b"\n")
    reply = json.loads(s.makefile("rb").readline())
    s.close()
    err = reply["error"]  # typed once the hello agreed: code, message
    assert reply["ok"] is False and err["code"] == "invalid", err
    assert expect in err["message"] and "\n" not in err["message"]
    assert agent.status()["agent"]["demo_load"] is False
    assert "Traceback" not in agent.paths["log"].read_text()


def test_live_replies_match_their_types(agent):
    """Every op with a reply type in protocol.OPS answers in that shape (the agent builds
    dicts; this keeps them and the protocol's Structs the same)."""
    import msgspec

    a = agent.write_profile("t-a")
    calls = [
        ("hello", {"version": __version__, "protocol": protocol.PROTOCOL_VERSION}),
        ("ping", {}),
        ("status", {}),
        ("profiles", {}),
        ("subscribe", {}),
        ("timeline", {}),
        ("start", {"profile": a}),
        ("logs", {"lines": 5}),
        ("stop", {"wait": True}),
        ("start", {"profile": a, "wait": True}),
        ("status", {}),
        ("preflight", {"profile": a}),
        ("demo_load", {"on": False}),
        ("bench_list", {}),
        (
            "bench_progress",
            {"run_id": "none", "state": "running", "done": 3, "client": "x", "ts": 1.0},
        ),
        ("job_list", {}),
    ]
    checked = set()
    for op, args in calls:
        if op in ("logs",):
            agent.wait_state(("launching", "ready"))
        result = agent.call(op, **args)
        msgspec.convert(result, protocol.OPS[op].reply)
        checked.add(op)
    assert [n for n, o in protocol.OPS.items() if o.reply is Any] == []
    # the others: restart and swap (tests/agent), shutdown (teardown), bench_* (tests/bench),
    # job_* (tests/jobs), all through the fixture's `call`, which decodes every reply
    assert {"hello", "status", "preflight", "job_list"} <= checked
    # the runner's envelope fields are not taken as its progress
    ev = agent.events("bench.progress")[-1]
    assert ev["client"].startswith("test:") and ev["ts"] > 1.0 and ev["done"] == 3
