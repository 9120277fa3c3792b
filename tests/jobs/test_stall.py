"""StallWatch (sgltui/jobs/stall.py): when a job that may send is stalled, and why."""

from __future__ import annotations

from sgltui.jobs.stall import StallWatch

SERVER = "slot 0's server (p)"


def test_no_answer_for_stall_s_says_stalled_once_and_an_answer_clears_it():
    w = StallWatch(stall_s=60)
    assert w.observe(0.0, 10, {"in_flight": 4}, SERVER) is None
    assert w.observe(59.0, 10, {"in_flight": 4}, SERVER) is None
    line = w.observe(60.5, 10, {"in_flight": 4}, SERVER)
    assert line == (
        "stalled: no answer for 60s while slot 0's server (p) is ready; 4 requests in flight "
        "get no answer (a wedged server?); check `sgltui logs`, or `sgltui restart`"
    )
    assert w.observe(70.0, 10, {"in_flight": 4}, SERVER) is None and w.stalled == line  # once
    assert w.observe(71.0, 11, {"in_flight": 4}, SERVER) is None and w.stalled is None


def test_the_why_is_read_from_the_runners_counters():
    w = StallWatch(stall_s=5)
    w.observe(0.0, 0, {"conn_errors": 3, "retries": 1}, SERVER)
    assert "12 connection errors since" in w.observe(6.0, 0, {"conn_errors": 15}, SERVER)
    w = StallWatch(stall_s=5)
    w.observe(0.0, 0, {"retries": 1}, SERVER)
    assert "7 requests were answered with errors" in w.observe(6.0, 0, {"retries": 8}, SERVER)
    w = StallWatch(stall_s=5)
    w.observe(0.0, 0, {"in_flight": 0}, SERVER)
    assert "nothing is in flight" in w.observe(6.0, 0, {"in_flight": 0}, SERVER)


def test_long_answers_on_their_way_are_not_a_stall():
    """A server generating tokens (fresh metrics) is progress: 8k-token answers outlast 60 s."""
    w = StallWatch(stall_s=60)
    w.observe(0.0, 0, {"in_flight": 1}, SERVER)
    assert w.observe(200.0, 0, {"in_flight": 1}, SERVER, tokens_at=199.5) is None
    # counted from the last tokens, not from now: a reading that goes stale is no progress
    assert w.observe(259.0, 0, {"in_flight": 1}, SERVER, tokens_at=199.5) is None
    assert w.observe(260.0, 0, {"in_flight": 1}, SERVER, tokens_at=199.5) is not None


def test_reset_when_not_meant_to_send():
    w = StallWatch(stall_s=5)
    w.observe(0.0, 0, {}, SERVER)
    w.reset()  # paused, held, server down
    assert w.observe(100.0, 0, {}, SERVER) is None  # the clock starts again
