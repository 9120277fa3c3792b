"""The agent endpoint's decisions (agent/endpoint/policy.py), pure: names, plans, collation, idle;
the leases a running job holds (agent/endpoint/leases.py); a profile's `aliases` and `idle_s` checked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sgltui.agent.endpoint.leases import Leases
from sgltui.agent.endpoint.policy import (
    EndpointConfig,
    Routable,
    SlotLook,
    Traffic,
    idle_due,
    names_table,
    plan,
    resolve,
    switch_due,
)
from sgltui.agent.jobs.records import JobRecord
from sgltui.core.profiles import ProfileError, get_profile

A = Routable("base", served="Qwen/Qwen3-8B", aliases=("chat",))
B = Routable("mtp", served="Qwen/Qwen3-8B", aliases=("fast",))


def test_a_name_an_alias_and_a_served_model_name_each_find_their_profile():
    table = names_table([A, B])
    assert resolve("base", table) == "base"
    assert resolve("fast", table) == "mtp"
    assert resolve("chat", table) == "base"
    # one served-model-name for two profiles: the one that serves now wins
    assert resolve("Qwen/Qwen3-8B", table, serving=["mtp"]) == "mtp"
    assert resolve("Qwen/Qwen3-8B", table, serving=["base"]) == "base"
    assert resolve("nope", table) is None
    # a profile's own name wins over another's alias
    table = names_table([A, Routable("x", aliases=("base",))])
    assert resolve("base", table) == "base"


def look(sid: str, profile: str | None, **kw) -> SlotLook:
    ready = kw.pop("ready", profile is not None)
    return SlotLook(sid, profile, ready=ready, has_server=profile is not None, **kw)


def test_plan_routes_wakes_starts_then_evicts_the_least_recently_used():
    one = [look("0", "base", asleep=("mtp",))]
    assert plan("base", one, {}, {}).kind == "route"
    act = plan("mtp", one, {}, {})
    assert (act.kind, act.slot, act.victim) == ("wake", "0", "base")
    two = [look("0", "base"), look("1", None)]
    act = plan("mtp", two, {}, {})
    assert (act.kind, act.slot) == ("start", "1")
    full = [look("0", "base"), look("1", "big")]
    act = plan("mtp", full, {}, {"base": 10.0, "big": 5.0})
    assert (act.kind, act.slot, act.victim) == ("evict", "1", "big")
    act = plan("mtp", full, {"big": "job j (1)"}, {"base": 10.0, "big": 5.0})
    assert (act.kind, act.victim) == ("evict", "base")  # the leased one is passed over


def test_plan_blocked_by_leases_names_the_holders_and_busy_means_wait():
    full = [look("0", "base", asleep=("mtp",))]
    act = plan("mtp", full, {"base": "job nightly (j1)"}, {})
    assert act.kind == "blocked" and "leased by job nightly (j1)" in act.reason
    starting = [SlotLook("0", "mtp", busy=True, has_server=True)]
    assert plan("mtp", starting, {}, {}).kind == "wait"
    pooled = [look("0", "base", pooled=True)]
    assert plan("mtp", pooled, {}, {}).kind == "none"


def test_collation_switches_when_the_serving_queue_empties_or_the_window_ends():
    cfg = EndpointConfig(collate_s=5.0, settle_s=0.3)
    waiter = Traffic(waiting=1, waiting_since=100.0)
    busy = Traffic(in_flight=1, last_request=100.0)
    assert not switch_due(busy, waiter, 101.0, cfg)  # A still serves: B waits (AABB)
    assert switch_due(busy, waiter, 105.0, cfg)  # ... at most the window
    quiet = Traffic(last_request=100.5)
    assert not switch_due(quiet, waiter, 100.6, cfg)  # a closed-loop client's gap is no end
    assert switch_due(quiet, waiter, 100.9, cfg)  # A's queue is empty: switch now


def test_idle_due_only_when_set_and_nothing_waits_or_runs():
    t = Traffic(last_request=0.0)
    assert not idle_due(t, None, 1e9)
    assert not idle_due(t, 0, 1e9)
    assert idle_due(t, 60, 61)
    assert not idle_due(t, 60, 59)
    assert not idle_due(Traffic(in_flight=1), 60, 1e9)


def test_a_running_job_holds_a_lease_on_its_slots_profile(tmp_path):
    slot = SimpleNamespace(id="0", profile_name="base")

    def job(jid: str, name: str, state: str, user_paused: bool = False) -> JobRecord:
        return JobRecord(id=jid, name=name, slot="0", state=state, user_paused=user_paused,
                         input="/in", output="/out", concurrency=1, created=1.0)  # fmt: skip

    jobs = {
        "j1": job("j1", "nightly", "running"),
        "j2": job("j2", "old", "done"),
        "j3": job("j3", "paused", "running", user_paused=True),
    }
    ctx = SimpleNamespace(slots={"0": slot}, state_dir=tmp_path)
    leases = Leases(ctx, SimpleNamespace(jobs=jobs))  # type: ignore[arg-type]
    assert leases.held() == {"base": "job nightly (j1)"}
    jobs["j1"].state = "done"
    assert leases.held() == {}
    assert leases.by_hand_on("0") is None


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('aliases = "fast"', "must be a list of strings"),
        ('aliases = ["has space"]', "is not a profile name"),
        ("idle_s = -1", "must be a number of seconds"),
    ],
)
def test_bad_aliases_and_idle_s_are_one_line_with_the_fix(tmp_path, line, says):
    (tmp_path / "p.toml").write_text(f'name = "p"\n{line}\n[server]\nmodel-path = "m"\n')
    with pytest.raises(ProfileError, match=says):
        get_profile("p", [tmp_path])


def test_aliases_and_idle_s_are_read(tmp_path):
    (tmp_path / "p.toml").write_text(
        'name = "p"\naliases = ["fast", "chat"]\nidle_s = 600\n[server]\nmodel-path = "m"\n'
    )
    p = get_profile("p", [tmp_path])
    assert p.aliases == ("fast", "chat") and p.idle_s == 600.0


def test_the_report_counts_request_driven_swaps():
    from sgltui.session.report_sections import endpoint

    events = [
        {"type": "endpoint", "action": "wake", "ts": 1.0, "text": "mtp woken on slot 0 by ..."},
        {"type": "endpoint", "action": "evict", "ts": 2.0, "text": "base evicted ..."},
        {"type": "endpoint", "action": "refused", "ts": 3.0, "text": "x waits: leased"},
        {"type": "endpoint", "action": "lease", "ts": 4.0, "text": "lease on base held"},
        {"type": "swap.done", "ts": 5.0},
    ]
    r = endpoint(events)
    assert r is not None and r["request_driven_swaps"] == 2
    assert r["counts"] == {"wake": 1, "evict": 1, "refused": 1}
    assert endpoint([{"type": "swap.done"}]) is None


def test_lease_for_takes_a_time_with_its_unit_or_says_how():
    from sgltui.commands import CliError
    from sgltui.commands.lease import duration

    assert duration("2h") == 7200 and duration("30m") == 1800 and duration("90") == 90
    with pytest.raises(CliError, match="90s, 30m, 2h or 1d"):
        duration("soon")
