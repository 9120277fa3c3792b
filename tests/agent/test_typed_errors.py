"""An error reply is typed (protocol.Error: code, message, fix) and each code reaches a client as
its own exception class (client/errors.py), so that callers act on the kind of refusal,
never on its words. Against a real agent; the line a person reads is unchanged."""

from __future__ import annotations

import json
import socket

import pytest

from sgltui import __version__, protocol
from sgltui.client import errors as ce
from tests.jobs.batch_input import write_input


def test_each_refusal_arrives_as_its_class(agent, tmp_path):
    a = agent.write_profile("t-a")
    slow = agent.write_profile("t-slow", sim_slow_start=30)
    with pytest.raises(ce.NotFound, match="no slot '7'"):
        agent.call("start", profile=a, slot="7")
    with pytest.raises(ce.NotFound, match="no job"):
        agent.call("job_status", job="nope")
    with pytest.raises(ce.NotFound, match="no bench run"):
        agent.call("bench_stop", run_id="nope")
    with pytest.raises(ce.Invalid, match="unknown op 'frobnicate'"):
        agent.call("frobnicate")
    with pytest.raises(ce.Invalid, match="on: expected `bool`"):
        agent.call("demo_load", on="maybe")
    with pytest.raises(ce.Already, match="is not running anything"):
        agent.call("stop", wait=True)
    agent.call("start", profile=a, wait=True)
    with pytest.raises(ce.Already, match=f"already runs {a}") as again:
        agent.call("start", profile=a)
    # what is wrong, and what to do in both front ends' words: the CLI's line as before, the
    # TUI's toast naming keys (issue #48)
    exc = again.value
    assert exc.message == f"slot 0 already runs {a} (ready)" and "sgltui" not in exc.message
    assert exc.fix == "use `sgltui swap PROFILE` or `sgltui stop` first"
    assert (
        exc.fix_tui is not None
        and "{key:server.stop} to stop" in exc.fix_tui
        and "sgltui" not in exc.fix_tui
    )
    assert str(exc) == f"{exc.message}; {exc.fix}" and exc.tui_line().endswith(exc.fix_tui)
    with pytest.raises(ce.Already, match=f"already runs {a}"):
        agent.call("swap", profile=a)
    agent.call("swap", profile=slow)  # accepted; the launch takes its time
    with pytest.raises(ce.Busy, match="already running"):
        agent.call("swap", profile=a)
    agent.call("stop", drain="force", wait=True)


def test_a_pinned_job_refuses_with_its_message_and_fix_apart(agent, tmp_path):
    slow = {"time_scale": 0.1, "sim_slow_start": 0.1}
    a, b = agent.write_profile("t-a", **slow), agent.write_profile("t-b", **slow)
    agent.call("start", profile=a, wait=True)
    inp = tmp_path / "p.jsonl"
    write_input(inp, 2000, max_tokens=256)
    view = agent.call("job_run", input=str(inp), output=str(tmp_path / "o.jsonl"), pinned=True)
    # the preflight says so first, in the refusal's words (the TUI asks before it sends)
    pin = agent.call("preflight", profile=b)["pinned"]
    assert pin == {
        "by": "job",
        "what": f"batch job {view['name']} ({view['id']}) is pinned to slot 0",
    }
    with pytest.raises(ce.Pinned) as err:
        agent.call("swap", profile=b, wait=True)
    exc = err.value
    assert exc.message == f"swap refused: {pin['what']}" and "--yes" not in exc.message
    assert exc.fix is not None and "--yes" in exc.fix
    assert exc.fix_tui is not None and "Yes" in exc.fix_tui and "--yes" not in exc.fix_tui
    assert str(exc) == f"{exc.message}; {exc.fix}"  # the CLI's one line, as before
    agent.call("job_cancel", job=view["id"])


def _ask(reader, sock: socket.socket, op: str, **args) -> dict:
    sock.sendall(json.dumps({"id": 1, "op": op, "args": args}).encode() + b"\n")
    return json.loads(reader.readline())


def test_the_wire_form_before_and_after_hello(agent):
    """Before a hello agrees an error is the bare line (a client of another version reads it:
    that is how it learns of the mismatch); after, it is an Error with its code."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(agent.paths["socket"]))
        r = s.makefile("rb")
        old = _ask(r, s, "hello", version="0.0.1-old", protocol=2)
        assert isinstance(old["error"], str) and "agent stop" in old["error"]
        hello = {"version": __version__, "protocol": protocol.PROTOCOL_VERSION}
        assert _ask(r, s, "hello", **hello)["ok"] is True
        err = _ask(r, s, "status", bogus=1)["error"]
        assert err["code"] == "invalid" and "bogus" in err["message"]
        assert set(err) <= {"code", "message", "fix"}


def test_a_bare_line_is_typed_by_its_op():
    """An agent older than typed errors (or any agent before a hello agreed) sends a bare line:
    a refused hello is a version mismatch, anything else a refusal."""
    assert type(ce.from_reply("hello", "the agent runs sgltui 0.1 ...")) is ce.VersionMismatch
    assert type(ce.from_reply("swap", "swap refused: ...")) is ce.Refused
    typed = protocol.Error(code="busy", message="slot 0 is busy", fix="wait")
    exc = ce.from_reply("swap", typed)
    assert type(exc) is ce.Busy and str(exc) == "slot 0 is busy; wait"
    assert set(ce.BY_CODE) == set(protocol.ERROR_CODES)
