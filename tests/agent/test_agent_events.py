"""`sgltui agent events`: the session's recent events from the agent itself (the `events` op),
in the Activity tab's words, for a client that cannot read the session's files."""

from __future__ import annotations

import json

from sgltui import protocol
from tests.fixtures.cli import agent_sgltui as sgltui


def test_agent_events_says_what_happened_in_the_activity_words(agent):
    a = agent.write_profile("t-a")
    agent.call("start", profile=a, wait=True)

    raw = agent.call("events")  # the fixture decodes the reply with its type in protocol.OPS
    types = [ev["type"] for ev in raw]
    assert {"agent.start", "command", "slot.state"} <= set(types), types
    assert all(not isinstance(protocol.decode_event(ev), protocol.OtherEvent) for ev in raw)

    r = sgltui(agent, "agent", "events")
    assert r.returncode == 0, r.stderr
    said = [line.split("  ", 1)[1] for line in r.stdout.splitlines()]
    assert f"start {a} on slot 0" in said, said
    assert any(line.startswith(f"slot 0: ready ({a} ready on port") for line in said), said
    assert "agent start" in said and len(said) <= 20

    r = sgltui(agent, "agent", "events", "--json", "-n", "2")
    last = [json.loads(line) for line in r.stdout.splitlines()]
    assert [ev["type"] for ev in last] == [
        t for t in types if t in ("agent.start", "command", "slot.state")
    ][-2:]  # the last two that make an Activity line (slot.phase makes none)

    r = sgltui(agent, "agent", "events", "--all")
    assert any(line.endswith("slot.phase slot 0") for line in r.stdout.splitlines()), r.stdout
    r = sgltui(agent, "agent", "events", "--slot", "9")
    assert r.returncode == 0 and r.stdout == ""
