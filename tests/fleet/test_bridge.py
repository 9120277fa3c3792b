"""`sgltui agent bridge` is the agent's socket on stdin/stdout (no ssh needed here)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from sgltui import __version__
from sgltui.client import AgentClient


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
