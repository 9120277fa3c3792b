"""A second demo on the same host (issue 37 item 8): the demo picks free ports itself, and a
port refusal names the setting in agent.toml or host.toml, never an environment variable."""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import urllib.request

from sgltui.commands import demo_ports
from sgltui.commands import tui as tui_cmd
from sgltui.core import placement


@contextlib.contextmanager
def held(*ports):
    """Listen on each port (one already held, another user's, is held anyway). SO_REUSEADDR, as
    demo_ports.free binds: a port in TIME_WAIT (a demo that just stopped) is held too, not left
    free for the code under test to pick (issue 51 item 15)."""
    with contextlib.ExitStack() as stack:
        for port in ports:
            s = stack.enter_context(socket.socket())
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with contextlib.suppress(OSError):
                s.bind(("127.0.0.1", port))
                s.listen()
        yield


def time_wait_port() -> int:
    """A port the OS picked, left in TIME_WAIT (the server side closed first), as the demo's
    front port is right after a demo stops."""
    with socket.socket() as ls:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", 0))
        ls.listen()
        port = ls.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = ls.accept()
        conn.close()  # the active close: TIME_WAIT on the listening port
        client.close()
    return port


def test_slot_ports_keep_clear_of_busy_ones():
    lay = placement.layout(2, simulated=True, pool_port=30080, taken={31000: "in use"})
    ports = [s.port for s in lay.slots]
    assert 31000 not in ports and all(31000 not in placement.footprint(p) for p in ports)
    # A port of this test's own (30080 itself depended on the machine's recent past: in
    # TIME_WAIT after a demo, `held` could not bind it and front_port found it free), in
    # TIME_WAIT on purpose: held still holds it.
    port = time_wait_port()
    with held(port):
        assert not demo_ports.free(port)
        assert demo_ports.front_port(port) != port


def test_a_second_demo_gets_free_ports_and_serves(agent_handle, monkeypatch):
    """The usual server port (30000) and front port (30080) held by someone else: the demo's
    agent gets a host.toml of its own on free ports, and demo-mtp serves on its endpoint."""
    agent = agent_handle
    monkeypatch.delenv(placement.HOST_FILE_ENV, raising=False)
    with held(demo_ports.SERVER_PORT, placement.DEFAULT_POOL_PORT):
        args = argparse.Namespace(state_dir=str(agent.state_dir), profiles=None)
        tui_cmd._demo_ports(args)  # sets the agent's host file in this process's environment
        path = tui_cmd.os.environ.pop(placement.HOST_FILE_ENV)
        monkeypatch.setenv(placement.HOST_FILE_ENV, path)
        lay = placement.parse(open(path).read())
        (slot,), (pool,) = lay.slots, lay.pools
        assert slot.port != demo_ports.SERVER_PORT and pool.port != placement.DEFAULT_POOL_PORT
        agent.start()
        agent.call("start", profile="demo-mtp", pool="all", wait=True)
        with urllib.request.urlopen(f"{pool.endpoint}/v1/models", timeout=10) as r:
            assert json.load(r)["data"], "the demo's endpoint answers"


def test_a_held_front_port_names_the_setting_in_agent_toml(agent_handle, busy_port, monkeypatch):
    agent = agent_handle
    monkeypatch.setenv("SGLTUI_FRONT_PORT", str(busy_port))
    agent.start()
    front = agent.status()["slots"][0]["front"]
    assert "set [front] port in " in front["error"] and "agent.toml" in front["error"], front
    assert "SGLTUI_" not in front["error"]
