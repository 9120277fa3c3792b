"""The slot's lifecycle table (sgltui/agent/slot/lifecycle.py): complete, strict, no dead ends."""

from __future__ import annotations

import pytest

from sgltui.agent.slot import lifecycle as L


def reachable(start: str) -> set[str]:
    """Every state some sequence of events leads to from `start` (itself included)."""
    seen, todo = {start}, [start]
    while todo:
        s = todo.pop()
        for (src, _), dst in L.TRANSITIONS.items():
            if src == s and dst not in seen:
                seen.add(dst)
                todo.append(dst)
    return seen


def test_every_state_is_reachable_and_can_get_back_to_stopped():
    assert reachable(L.STOPPED) == set(L.STATES)
    for state in L.STATES:  # no state a command cannot leave
        assert L.STOPPED in reachable(state), state


def test_the_documented_paths():
    s = L.STOPPED
    for ev, want in [
        (L.SPAWN, L.LAUNCHING),
        (L.READY_EV, L.READY),
        (L.DRAIN, L.DRAINING),
        (L.STOP, L.STOPPING),
        (L.STOPPED_EV, L.STOPPED),
        (L.SPAWN, L.LAUNCHING),
        (L.EXIT, L.FAILED),
        (L.SPAWN, L.LAUNCHING),
        (L.READY_EV, L.READY),
        (L.EXIT, L.CRASHED),
        (L.STOPPED_EV, L.STOPPED),
        (L.REFUSE, L.FAILED),
    ]:
        s = L.next_state(s, ev)
        assert s == want, (ev, s)


def test_ready_clears_phase_and_cause_failed_keeps_them():
    assert L.ENTRY[L.READY].clears_phase and not L.ENTRY[L.READY].keeps_cause
    assert L.ENTRY[L.FAILED].keeps_cause and not L.ENTRY[L.FAILED].clears_phase


@pytest.mark.parametrize(
    "state,event", [(L.READY, L.SPAWN), (L.STOPPED, L.READY_EV), (L.STOPPING, L.DRAIN)]
)
def test_an_event_the_table_does_not_allow_raises(state, event):
    with pytest.raises(L.LifecycleError, match="not allowed"):
        L.next_state(state, event)
