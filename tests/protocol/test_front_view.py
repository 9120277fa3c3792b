"""The front endpoint's events and status fields in the typed protocol (issue 18 #3)."""

from __future__ import annotations

from sgltui import protocol


def test_front_events_fold_into_the_slot():
    events = [
        {"type": "front.hold", "ts": 1.0, "slot": "0", "why": "swap a -> b", "in_flight": 2},
        {"type": "front.route", "ts": 2.0, "slot": "0", "backend": "http://127.0.0.1:31001"},
    ]
    state = protocol.fold(events)
    front = state.slots["0"].front
    assert front is not None and front.state == "routing"
    assert front.backend == "http://127.0.0.1:31001"
    state = protocol.fold(
        [{"type": "front.release", "ts": 3.0, "slot": "0", "why": "failed"}], state
    )
    assert state.slots["0"].front.state == "no server" and state.slots["0"].front.backend is None
    decoded = protocol.decode_event(events[0])
    assert isinstance(decoded, protocol.FrontHold) and decoded.in_flight == 2


def test_status_front_and_last_stop_are_typed():
    slot = protocol.slot_from_status(
        {
            "id": "0",
            "front": {"url": "http://127.0.0.1:30080", "state": "holding", "held_now": 3},
            "last_stop": {"signal": "SIGKILL", "requests_at_sigkill": 2, "drain_timed_out": True},
        }
    )
    assert slot.front.url == "http://127.0.0.1:30080" and slot.front.held_now == 3
    assert slot.last_stop.signal == "SIGKILL" and slot.last_stop.requests_at_sigkill == 2
