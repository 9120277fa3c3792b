"""Each op's handler is found through one table (agent/op_routes.py), never by its name's text;
internal calls name their op by the arguments' Struct (protocol.op_for)."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.supervisor import Supervisor


@pytest.fixture
def sup(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLTUI_ENDPOINT_PORT", "0")
    return Supervisor(tmp_path / "state", tmp_path / "agent.sock", slot_ids=("0",))


def _args_type(handler):
    fn = inspect.unwrap(handler)
    text = inspect.signature(fn).parameters["args"].annotation
    return eval(text, fn.__globals__) if isinstance(text, str) else text


def test_every_op_has_exactly_one_handler_of_its_arguments(sup):
    assert set(sup.routes) == set(protocol.OPS)
    handlers = [inspect.unwrap(r.handler) for r in sup.routes.values()]
    funcs = [(h.__self__, h.__func__) for h in handlers]
    assert len(set(funcs)) == len(funcs), "two ops share a handler"
    for op, route in sup.routes.items():
        assert _args_type(route.handler) is protocol.OPS[op].args, op
    # and no handler left out of the table
    parts = {
        sup.agent_ops,
        sup.ops,
        sup.swaps,
        sup.batch,
        sup.standby_ops,
        sup.leases,
        sup.attacher,
    }
    every = {(p, n) for p in parts for n, _ in inspect.getmembers(type(p)) if n.startswith("op_")}
    assert every == {(h.__self__, h.__name__) for h in handlers}
    # the ops that take their own lock: a slot's lifecycle, and attach/adopt/detach
    own = {op for op, r in sup.routes.items() if r.own_lock}
    assert own == {"preflight", "start", "stop", "restart", "swap", "attach", "adopt", "detach"}


def test_an_unknown_op_is_the_typed_refusal(sup):
    with pytest.raises(OpError) as err:
        asyncio.run(sup.handle("frobnicate", protocol.Args(), None))
    assert err.value.error.code == "invalid"
    assert str(err.value).startswith("unknown op 'frobnicate'; this agent knows: adopt, attach")
    with pytest.raises(OpError) as err:  # an op given the wrong arguments' Struct: a bug
        asyncio.run(sup.handle("swap", protocol.StopArgs(), None))
    assert err.value.error.code == "internal"


def test_the_arguments_name_their_op():
    assert protocol.op_for(protocol.SwapArgs()) == "swap"
    assert protocol.op_for(protocol.StartArgs()) == "start"  # SwapArgs is one, but not this
    assert protocol.op_for(protocol.PreflightArgs()) == "preflight"
    assert protocol.op_for(protocol.JobArgs(), "job_cancel") == "job_cancel"
    with pytest.raises(TypeError, match="serves several ops"):
        protocol.op_for(protocol.JobArgs())
    with pytest.raises(TypeError, match="does not take"):
        protocol.op_for(protocol.SwapArgs(), "start")
    for op, spec in protocol.OPS.items():  # every Struct of one op names it
        if list(s.args for s in protocol.OPS.values()).count(spec.args) == 1:
            assert protocol.OP_OF_ARGS[spec.args] == op


def test_a_client_sends_the_arguments_struct_which_names_its_op(tmp_path):
    from sgltui.client import AgentClient

    sent = []

    async def call(op, **args):
        sent.append((op, args))

    client = AgentClient(tmp_path)
    client.call = call  # what goes on the wire: the op and its arguments
    drain = protocol.Drain.FORCE
    asyncio.run(client.call_args(protocol.SwapArgs(profile="b", slot="0", drain=drain)))
    op, args = sent[0]
    assert op == "swap" and args["profile"] == "b" and args["drain"] == "force"
    # what the agent parses is the Struct that was sent
    assert protocol.parse_args(op, args) == protocol.SwapArgs(profile="b", slot="0", drain=drain)
