"""sgltui/protocol/: requests and their arguments are checked by type, in one place."""

from __future__ import annotations

import inspect

import pytest

from sgltui import protocol
from sgltui.agent.agent_ops import AgentOps
from sgltui.agent.endpoint.leases import Leases
from sgltui.agent.jobs.jobs_host import JobsHost
from sgltui.agent.slot.attach import Attacher
from sgltui.agent.swap.coordinator import Swaps
from sgltui.agent.swap.operations import Operations
from sgltui.agent.swap.standby_ops import StandbyOps
from sgltui.core import causes


@pytest.mark.parametrize(
    ("op", "args", "expect"),
    [
        ("demo_load", {"on": "maybe"}, "on: expected `bool`, got `str`"),
        ("timeline", {"series": 5}, "series: expected"),
        ("start", {"profile": "a", "profiles_dirs": "/etc"}, "profiles_dirs: expected `array`"),
        ("stop", {"drain": "maybe"}, "(one of: wait, force)"),
        ("logs", {"lines": -1}, "lines: expected `int` >= 0"),
        ("start", {"profile": "a", "bogus": 1}, "unknown field `bogus`"),
        ("stop", {"slot": 0}, "slot: expected `str | null`"),
        ("frobnicate", {}, "unknown op 'frobnicate'"),
    ],
)
def test_bad_arguments_are_one_line(op, args, expect):
    """Issue 18 #5: loose types walked a string, turned the load on, raised TypeError."""
    with pytest.raises(protocol.ProtocolError) as exc:
        protocol.parse_args(op, args)
    assert expect in str(exc.value) and "\n" not in str(exc.value)


def test_good_arguments_get_their_defaults():
    args = protocol.args_dict(protocol.parse_args("swap", {"profile": "b", "drain": "force"}))
    assert args == {
        "profile": "b",
        "slot": None,
        "pool": None,
        "rollback": True,
        "drain": "force",
        "profiles_dirs": [],
        "force": [],
        "wait": False,
        "confirm": False,
    }
    assert type(args["drain"]) is str


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b"not json",
        b"[1, 2]",
        b'{"op": 5}',
        b'{"id": {}, "op": "x"}',
    ],
)
def test_bad_request_lines_are_one_line(raw):
    with pytest.raises(protocol.ProtocolError) as exc:
        protocol.decode_request(raw)
    assert str(exc.value).startswith("bad request") and "\n" not in str(exc.value)


def test_version_mismatch_says_which_and_how_to_restart():
    assert protocol.version_mismatch("0.1.0", protocol.PROTOCOL_VERSION, "0.1.0") is None
    line = protocol.version_mismatch("0.0.9", 1, "0.1.0", protocol.PROTOCOL_VERSION)
    assert line and "0.0.9 (protocol 1)" in line and "0.1.0" in line
    assert "sgltui agent stop" in line and "\n" not in line


def test_events_decode_leniently():
    ev = protocol.decode_event({"type": "swap.step", "ts": 5, "slot": 0, "from": "a", "to": "b"})
    assert isinstance(ev, protocol.SwapStep) and ev.from_ == "a" and ev.slot == "0"
    assert protocol.event_dict(ev)["from"] == "a"
    odd = protocol.decode_event({"type": "slot.state", "state": "sideways", "ts": 1})
    assert isinstance(odd, protocol.OtherEvent) and odd.raw["state"] == "sideways"
    new = protocol.decode_event({"type": "from.the.future", "x": 1})
    assert isinstance(new, protocol.OtherEvent) and protocol.event_dict(new)["x"] == 1


def test_every_cause_kind_is_known():
    assert {r.kind for r in causes.RULES} <= {k.value for k in protocol.CauseKind}


def test_encode_round_trip():
    line = protocol.encode(protocol.Reply(id=3, ok=False, error="no"))
    assert line.endswith(b"\n")
    msg = protocol.decode_message(line)
    assert isinstance(msg, protocol.Reply) and msg.id == 3 and msg.error == "no"
    push = protocol.decode_message(protocol.encode({"push": "log", "data": {"lines": []}}))
    assert isinstance(push, protocol.Push) and push.push == "log"


def test_secrets_file_prefix_is_the_launchers():
    from sgltui.core.launch_secrets import FILE_PREFIX

    assert protocol.SECRETS_FILE_PREFIX == FILE_PREFIX


def test_every_event_is_built_as_its_struct():
    """Events are built as their protocol Struct where they are published (agent/events.py):
    no site names an event type by a string (`emit("slot.state", ...)`, or a dict
    `{"ts": .., "type": ...}` written by hand) that could reach readers untyped. Each Struct's
    tag is in EVENT_TYPES."""
    import re
    from pathlib import Path

    import sgltui

    root = Path(sgltui.__file__).parent
    untyped = []
    for path in [
        *root.glob("agent/**/*.py"),
        *root.glob("session/**/*.py"),
        *root.glob("jobs/*.py"),
    ]:
        text = path.read_text()
        for pattern in (
            r"\b_?emit\(\s*\"([a-z_.]+)\"",
            r"\"ts\": [^,]+,\s*\"type\": \"([a-z_.]+)\"",
        ):
            untyped += [f"{path.name}: {name}" for name in re.findall(pattern, text)]
    assert untyped == []
    built = set()
    for path in [
        *root.glob("agent/**/*.py"),
        *root.glob("session/**/*.py"),
        *root.glob("jobs/*.py"),
    ]:
        built |= set(re.findall(r"\bprotocol\.([A-Z]\w+)\(", path.read_text()))
    events = {t.__name__ for t in protocol.EVENT_TYPES.values()}
    assert built & events, "no event Struct built anywhere: the pattern is stale"


def test_bench_spec_is_the_bench_s_own():
    """What bench_start takes is what the runner reads back: the agent passes the checked
    protocol.BenchSpec to the runner as JSON, and bench/spec.py's BenchSpec (protocol's, plus
    the checks) takes every field of it back unchanged."""
    import msgspec

    from sgltui.bench.spec import BenchSpec

    sent = protocol.parse_args(
        "bench_start", {"spec": {"profiles": ["a"], "concurrency": [2, 8], "requests": 10}}
    ).spec
    read = BenchSpec.from_dict(msgspec.json.decode(msgspec.json.encode(sent)))
    assert read.to_dict() == msgspec.to_builtins(sent)
    assert read.to_dict() == msgspec.to_builtins(protocol.BenchSpec(**read.to_dict()))


def test_bench_start_refuses_an_unknown_spec_field_in_one_line():
    with pytest.raises(protocol.ProtocolError, match="unknown field `concurrencies`"):
        protocol.parse_args("bench_start", {"spec": {"concurrencies": [1]}})


def test_every_handler_returns_its_op_s_reply_type():
    """The handler found through OPS is annotated with the op's reply type (a lifecycle op or
    job_run may answer later: Any)."""
    import typing

    def hints(cls: type, prefix: str = "") -> dict[str, object]:
        return {
            prefix + n[3:]: typing.get_type_hints(fn).get("return")
            for n, fn in inspect.getmembers(cls)
            if n.startswith("op_")
        }

    handlers = hints(AgentOps) | hints(Operations) | hints(Swaps) | hints(JobsHost, "job_")
    handlers |= hints(Attacher)
    handlers |= hints(StandbyOps, "standby_") | hints(Leases, "lease_")
    for op, spec in protocol.OPS.items():
        assert handlers[op] in (spec.reply, typing.Any), (op, handlers[op], spec.reply)


def test_bench_progress_view_holds_every_figure_of_the_event():
    """BenchRun.progress and the reducer's BenchView.progress are the bench.progress event's
    figures: a figure added to the event only would be dropped on the way to the viewers."""
    envelope = set(protocol.EventBase.__struct_fields__)
    event = set(protocol.BenchProgress.__struct_fields__) - envelope
    assert set(protocol.BenchProgressView.__struct_fields__) == event


def test_an_errors_tui_wording_is_optional_both_ways():
    """Error.fix_tui came without a protocol bump: an agent that predates it sends none (the
    reply decodes, the TUI shows `fix`), and a client that predates it decodes a reply that
    has one (the field is skipped) and reads the same line as before."""
    import msgspec

    def decoded(error: dict) -> protocol.Error:
        line = protocol.encode({"id": 1, "ok": False, "error": error})
        msg = protocol.decode_message(line)
        assert isinstance(msg, protocol.Reply) and isinstance(msg.error, protocol.Error)
        return msg.error

    old = decoded({"code": "busy", "message": "m", "fix": "run `sgltui stop`"})
    assert old.fix_tui is None and old.tui_line() == old.line() == "m; run `sgltui stop`"
    new = protocol.Error(code="busy", message="m", fix="run `sgltui stop`", fix_tui="press x")
    wire = msgspec.json.decode(protocol.encode(protocol.Reply(id=1, ok=False, error=new)))
    assert wire["error"]["fix_tui"] == "press x" and decoded(wire["error"]) == new
    assert new.line() == "m; run `sgltui stop`" and new.tui_line() == "m; press x"
    assert "fix_tui" not in msgspec.json.decode(protocol.encode(old))  # omitted when unset

    class OldError(msgspec.Struct, kw_only=True, omit_defaults=True):  # protocol 4's shape
        code: str
        message: str
        fix: str | None = None

    seen = msgspec.json.decode(msgspec.json.encode(wire["error"]), type=OldError)
    assert (seen.message, seen.fix) == ("m", "run `sgltui stop`")
