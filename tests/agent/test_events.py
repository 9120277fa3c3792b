"""The agent's event bus (agent/events.py): the recorder first, then every subscriber in order;
one subscriber's bug does not keep the event from the others."""

from __future__ import annotations

from typing import Any

from sgltui import protocol
from sgltui.agent.events import EventBus


def test_the_recorder_writes_first_and_every_subscriber_gets_what_it_wrote() -> None:
    bus = EventBus()
    seen: list[tuple[str, Any]] = []

    def record(event: protocol.EventBase) -> dict:
        seen.append(("recorder", type(event).__name__))
        return {**protocol.event_dict(event), "ts": 12.0, "redacted": True}

    def broken(event: protocol.EventBase, record: dict) -> None:
        raise RuntimeError("a subscriber's bug")

    bus.record_with(record)
    bus.subscribe(lambda ev, rec: seen.append(("clients", rec["redacted"])))
    bus.subscribe(broken)
    unsubscribe = bus.subscribe(lambda ev, rec: seen.append(("policy", ev.slot)))
    out = bus.publish(protocol.SlotPhase(slot="a", phase="loading"))
    assert out["ts"] == 12.0 and out["type"] == "slot.phase"
    assert seen == [("recorder", "SlotPhase"), ("clients", True), ("policy", "a")]
    unsubscribe()
    seen.clear()
    bus.publish(protocol.SlotPhase(slot="b"))
    assert seen == [("recorder", "SlotPhase"), ("clients", True)]


def test_changed_reaches_every_state_follower_and_a_failing_recorder_still_publishes() -> None:
    bus = EventBus()
    calls: list[str] = []

    def record(event: protocol.EventBase) -> dict:
        raise OSError("disk gone")

    bus.record_with(record)
    bus.on_change(lambda: calls.append("fronts"))
    bus.on_change(lambda: (_ for _ in ()).throw(RuntimeError("bug")))
    bus.on_change(lambda: calls.append("state file"))
    bus.changed()
    assert calls == ["fronts", "state file"]
    got: list[dict] = []
    bus.subscribe(lambda ev, rec: got.append(rec))
    bus.publish(protocol.DiskOk(slot="a"))
    assert got[0]["type"] == "disk.ok" and got[0]["ts"] > 0  # stamped though not written
