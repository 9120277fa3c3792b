"""`sgltui agent bridge` is the agent's socket on stdin/stdout (no ssh needed here)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading

from sgltui import __version__, dial
from sgltui.client import AgentClient
from sgltui.client.paths import SOCKET


def test_bridge_carries_the_protocol_and_starts_the_agent(agent_handle, tmp_path):
    agent = agent_handle  # not started: the bridge starts it
    argv = [sys.executable, "-m", "sgltui", "--state-dir", str(agent.state_dir), "agent", "bridge"]
    lines = (
        b'{"id":1,"op":"hello","args":{"version":"%s","protocol":1},"client":"t"}\n'
        % __version__.encode()
        + b'{"id":2,"op":"ping","args":{}}\n'
        + b"not json\n"
    )
    r = subprocess.run(argv, input=lines, capture_output=True, timeout=60, start_new_session=True)
    assert r.returncode == 0, r.stderr
    replies = [json.loads(x) for x in r.stdout.splitlines()]
    by_id = {x["id"]: x for x in replies}
    assert by_id[2]["ok"] and by_id[2]["result"]["pong"]
    agent.agent_pids.add(by_id[2]["result"]["pid"])  # started on demand: the fixture stops it
    assert by_id[None]["ok"] is False  # the agent's own answer to a bad line, passed through

    async def over_pipes() -> None:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        client = AgentClient(tmp_path, "t")
        await client.attach(proc.stdout, proc.stdin)  # hello: same version on both ends
        st = await client.call("status")
        assert st["agent"]["pid"] == by_id[2]["result"]["pid"]
        await client.close()
        assert await asyncio.wait_for(proc.wait(), 10) == 0  # EOF in: the bridge exits

    asyncio.run(over_pipes())


def test_a_bridge_to_a_running_agent_loads_no_command(tmp_path):
    """Each host's part of every fleet command: with the agent up, the bytes are copied before
    the CLI loads a command's modules (asyncio, the protocol's types: ~100 ms a start)."""
    state = tmp_path / "s"
    state.mkdir()
    assert dial.SOCKET == SOCKET
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(state / dial.SOCKET))
    srv.listen()

    def echo() -> None:  # an "agent" that answers every line with the line, upper case
        conn, _ = srv.accept()
        with conn, conn.makefile("rwb") as f:
            for line in f:
                f.write(line.upper())
                f.flush()

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    argv = [sys.executable, "-X", "importtime", "-m", "sgltui", "--state-dir", str(state)]
    r = subprocess.run([*argv, "agent", "bridge"], input=b"ping\n", capture_output=True, timeout=60)
    srv.close()
    assert r.returncode == 0 and r.stdout == b"PING\n", r.stderr[-500:]
    loaded = {ln.rsplit("|", 1)[-1].strip() for ln in r.stderr.decode().splitlines()}
    assert "sgltui.dial" in loaded
    assert not loaded & {"asyncio", "sgltui.protocol", "sgltui.commands.server", "msgspec"}


def test_only_exactly_agent_bridge_takes_the_short_way():
    assert dial.bridge_state_dir(["agent", "bridge"]) == ""
    assert dial.bridge_state_dir(["--state-dir", "/x", "agent", "bridge"]) == "/x"
    for words in (
        ["agent", "bridge", "--help"],
        ["--profiles", "/p", "agent", "bridge"],
        ["agent", "status"],
        ["--state-dir", "/x", "agent"],
        [],
    ):
        assert dial.bridge_state_dir(words) is None
