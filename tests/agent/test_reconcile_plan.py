"""agent/pools/reconcile.py's plan: what the gateway must route against what smg says (pure)."""

from __future__ import annotations

from types import SimpleNamespace

from sgltui.agent.pools.gateway import WorkerState
from sgltui.agent.pools.reconcile import plan


def _slots():
    a = SimpleNamespace(id="a", state="ready", url="http://h:1")
    b = SimpleNamespace(id="b", state="crashed", url="http://h:2")
    return a, b


def _plan(gw, observed, held_out=frozenset()):
    a, b = _slots()
    return plan(gw, [a, b], lambda s: s.state == "ready", set(held_out), observed, lambda s: s.url)


def test_missing_ready_slot_is_added_and_a_loss_is_a_repair():
    gw = SimpleNamespace(urls=["http://h:1"], posted={})
    p = _plan(gw, [])
    assert [s.id for s in p.add] == ["a"] and "had lost it" in p.repairs["http://h:1"]


def test_a_dead_slots_worker_and_a_stranger_are_removed():
    gw = SimpleNamespace(urls=["http://h:1"], posted={})
    seen = [
        WorkerState("1", "http://h:1", "ready"),
        WorkerState("2", "http://h:2", "ready"),
        WorkerState("3", "http://x:9", "ready"),
    ]
    p = _plan(gw, seen)
    assert p.add == [] and sorted(p.remove) == ["http://h:2", "http://x:9"]
    assert "no slot of the pool serves" in p.repairs["http://x:9"]


def test_draining_held_out_and_just_posted_are_left_alone():
    import time

    gw = SimpleNamespace(urls=[], posted={"http://h:1": time.monotonic()})
    assert _plan(gw, []).add == []  # POSTed a moment ago: not listed yet
    gw = SimpleNamespace(urls=["http://h:1"], posted={})
    p = _plan(gw, [WorkerState("1", "http://h:1", "draining")])
    assert p.add == [] and p.remove == []
    assert _plan(gw, [], held_out={"a"}).add == []  # a roll holds it out


def test_a_failed_entry_for_a_ready_slot_is_registered_afresh():
    gw = SimpleNamespace(urls=["http://h:1"], posted={})
    p = _plan(gw, [WorkerState("1", "http://h:1", "failed")])
    assert [s.id for s in p.add] == ["a"] and p.remove == ["http://h:1"]
    assert "as failed" in p.repairs["http://h:1"]
