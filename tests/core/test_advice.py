"""core/advice.py: each proposal rule fires where its figure says so and stays quiet where it
does not; a candidate the cross-flag checks refuse is never shown; an accepted one is a profile
that extends the serving one and passes the checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sgltui import protocol
from sgltui.core import advice, advice_inputs
from sgltui.core.capacity import bound
from sgltui.core.flags import load_bundled_catalog
from sgltui.core.profiles import Profile, get_profile
from sgltui.core.units import GIB
from sgltui.core.validate import check_profile

CATALOG = load_bundled_catalog()


def _card(**kw: Any) -> dict[str, Any]:
    """A capacity card as core/capacity.py builds it, `bound` worked out by its own rule."""
    card: dict[str, Any] = {
        "kv_pool_tokens": 260_000,
        "kv_pool_gb": 16.0,
        "context_length": 32768,
        "chunked_prefill_size": 8192,
        "requested_max_running_requests": None,
    }
    card.update(kw)
    card["bound"] = bound(card, {})
    return card


def _mtp_card(mrr: int = 4, slots: int = 52) -> dict[str, Any]:
    """The seed's MTP profile on a 96 GB GPU: max-running-requests 4 by the flag, the state
    pool (52 slots, 5 per request) holding 10, as SGLang sizes it."""
    return _card(
        max_running_requests=mrr,
        requested_max_running_requests=4,
        mamba_state_slots=slots,
        mamba_slots_per_request=5,
        mamba_state_gb=14.0,
        kv_pool_tokens=245_000,
        speculative_algorithm="NEXTN",
    )


def _profile(name: str = "demo-mtp") -> Profile:
    return get_profile(name)


def _advise(s: advice.Situation, profile: Profile | None = None) -> advice.Advice:
    prof = profile or _profile(s.serving)
    return advice.advise(
        s, advice.profile_check(prof, CATALOG), lambda n: CATALOG.lookup(n) is not None
    )


def _situation(profile: Profile, card: dict[str, Any], **kw: Any) -> advice.Situation:
    return advice.Situation(profile.name, dict(profile.server), card, **kw)


def _rules(a: advice.Advice) -> list[str]:
    return [p.rule for p in a.proposals]


# --- bound by max-running-requests below what memory allows ---------------------------------


def test_raise_max_running_fires_when_the_flag_binds_below_memory() -> None:
    prof = _profile()
    a = _advise(
        _situation(prof, _mtp_card(), concurrency=19, prompt_tokens=1000, output_tokens=500)
    )
    p = next(p for p in a.proposals if p.rule == "raise-max-running")
    # the job wants 19, the state pool holds 52 // 5 = 10: raised to 10, not to 19
    assert p.delta == {"max-running-requests": 10}
    assert p.name == "demo-mtp+mrr10"
    assert "memory allows 10" in p.figure and "52 mamba state slots / 5" in p.figure
    assert p.cost["gpu_gb"] > 0 and p.cost["host_ram_gb"] == 0
    # and the note says the job's 19 are out of reach for this profile at all
    assert any("cannot run the job's 19" in n for n in a.notes)


def test_raise_max_running_stays_quiet_when_memory_binds_at_the_flag() -> None:
    prof = _profile()
    # 20 slots / 5 per request = 4: the flag is not what holds it back
    a = _advise(_situation(prof, _mtp_card(slots=20), concurrency=19))
    assert "raise-max-running" not in _rules(a)
    # nor when the job itself runs no more than the flag allows
    a = _advise(_situation(prof, _mtp_card(), concurrency=4))
    assert "raise-max-running" not in _rules(a)


def test_raise_max_running_reads_demand_from_a_queue_not_from_a_lone_request() -> None:
    prof = _profile()
    # no job yet: one request running and none waiting (a probe, a job not started) is no
    # demand, so the raise goes to what memory allows (52 slots // 5 = 10), not to that 1
    lone = {"num_running_reqs": 1, "num_queue_reqs": 0}
    s = _situation(prof, _mtp_card(), engine=lone, prompt_tokens=1000, output_tokens=500)
    p = next(p for p in _advise(s).proposals if p.rule == "raise-max-running")
    assert p.delta == {"max-running-requests": 10}
    # four running at the flag and two waiting: six want to run, and six is what it proposes
    queued = {"num_running_reqs": 4, "num_queue_reqs": 2}
    s = _situation(prof, _mtp_card(), engine=queued, prompt_tokens=1000, output_tokens=500)
    p = next(p for p in _advise(s).proposals if p.rule == "raise-max-running")
    assert p.delta == {"max-running-requests": 6}


# --- KV- or mamba-bound with host RAM free -> hicache ----------------------------------------


def test_hicache_fires_on_a_kv_bound_profile_sized_from_free_ram() -> None:
    prof = _profile("demo-base")
    card = _card(max_running_requests=130_000)  # 260k tokens / 2: the KV pool binds
    assert card["bound"]["by"] == "kv"
    a = _advise(_situation(prof, card, host_free_bytes=700e9))
    p = next(p for p in a.proposals if p.rule == "hicache")
    assert p.delta["enable-hierarchical-cache"] is True
    # half of (700 GB - 10 GiB) over a 16 GiB device pool, in halves, at most 8x
    usable = (700e9 - 10 * GIB) * 0.5
    assert p.delta["hicache-ratio"] == min(8.0, int(usable / (16 * GIB) * 2) / 2)
    assert p.cost["host_ram_gb"] == pytest.approx(p.delta["hicache-ratio"] * 16, abs=0.1)


def test_hicache_ratio_follows_the_ram_left_after_the_standbys() -> None:
    prof = _profile("demo-base")
    card = _card(max_running_requests=130_000)
    a = _advise(_situation(prof, card, host_free_bytes=60e9))
    ratio = next(p for p in a.proposals if p.rule == "hicache").delta["hicache-ratio"]
    assert ratio == 1.0  # (60 GB - 10 GiB) / 2 = 25 GB holds one device pool of 16 GiB


def test_hicache_stays_quiet_without_free_ram_or_when_the_flag_binds() -> None:
    prof = _profile("demo-base")
    kv_bound = _card(max_running_requests=130_000)
    assert "hicache" not in _rules(_advise(_situation(prof, kv_bound, host_free_bytes=30e9)))
    assert "hicache" not in _rules(_advise(_situation(prof, _mtp_card(), host_free_bytes=700e9)))
    on = _profile("demo-no-mtp-hicache")
    assert "hicache" not in _rules(_advise(_situation(on, kv_bound, host_free_bytes=700e9)))


def test_a_proposal_the_cross_flag_checks_refuse_is_not_shown() -> None:
    base = _profile("demo-base")
    prof = Profile(
        name="no-radix",
        launcher="sim",
        server={**base.server, "disable-radix-cache": True},
    )
    card = _card(max_running_requests=130_000)
    a = _advise(_situation(prof, card, host_free_bytes=700e9), prof)
    assert "hicache" not in _rules(a)
    refused = next(r for r in a.refused if r["rule"] == "hicache")
    assert "disable-radix-cache" in refused["why"] and "hierarchical" in refused["why"]


# --- MTP acceptance falling at the job's concurrency ----------------------------------------


def test_falling_acceptance_proposes_fewer_steps_adaptive_and_plain() -> None:
    prof = _profile()
    s = _situation(prof, _mtp_card(), accept_by_c={1: 3.2, 4: 2.9, 8: 2.3}, concurrency=8)
    a = _advise(s)
    rules = _rules(a)
    assert {"fewer-draft-tokens", "speculative-adaptive", "plain"} <= set(rules)
    fewer = next(p for p in a.proposals if p.rule == "fewer-draft-tokens")
    assert fewer.delta == {"speculative-num-steps": 2, "speculative-num-draft-tokens": 3}
    assert "2.30 at c=8" in fewer.figure and "3.20 at c=1" in fewer.figure
    plain = next(p for p in a.proposals if p.rule == "plain")
    assert plain.delta["speculative-algorithm"] is False
    assert plain.delta["max-running-requests"] is False


def test_steady_acceptance_proposes_nothing_speculative() -> None:
    prof = _profile()
    s = _situation(prof, _mtp_card(), accept_by_c={1: 3.2, 8: 3.0}, concurrency=8)
    assert not {"fewer-draft-tokens", "speculative-adaptive", "plain"} & set(_rules(_advise(s)))


def test_adaptive_only_where_the_catalog_has_the_flag() -> None:
    prof = _profile()
    s = _situation(prof, _mtp_card(), accept_by_c={1: 3.2, 8: 2.0}, concurrency=8)
    a = advice.advise(s, advice.profile_check(prof, CATALOG), lambda n: n != "speculative-adaptive")
    assert "speculative-adaptive" not in _rules(a)
    assert "fewer-draft-tokens" in _rules(a)


# --- long prompts with low prefill throughput -> chunk size -------------------------------------


def test_long_prompts_with_slow_prefill_get_a_bigger_chunk() -> None:
    prof = _profile("demo-base")
    engine = {"input_throughput": 6000.0, "gen_throughput": 900.0, "num_running_reqs": 16}
    s = _situation(
        prof, _card(max_running_requests=19), engine=engine, prompt_tokens=12000, output_tokens=400
    )
    p = next(p for p in _advise(s).proposals if p.rule == "chunked-prefill")
    assert p.delta == {"chunked-prefill-size": 16384}
    assert p.cost["gpu_gb"] == pytest.approx((16384 - 8192) * 1.5 / 1024, abs=0.01)


def test_short_prompts_or_fast_prefill_keep_the_chunk() -> None:
    prof = _profile("demo-base")
    engine = {"input_throughput": 6000.0, "gen_throughput": 900.0}
    short = _situation(
        prof, _card(max_running_requests=19), engine=engine, prompt_tokens=2000, output_tokens=400
    )
    assert "chunked-prefill" not in _rules(_advise(short))
    fast = {"input_throughput": 200_000.0, "gen_throughput": 900.0}
    s = _situation(
        prof, _card(max_running_requests=19), engine=fast, prompt_tokens=12000, output_tokens=400
    )
    assert "chunked-prefill" not in _rules(_advise(s))


def test_reachable_concurrency_gets_no_note() -> None:
    prof = _profile()
    assert _advise(_situation(prof, _mtp_card(), concurrency=8)).notes == []


# --- accepting, and the inputs from the agent's status --------------------------------------


def test_accepted_proposal_is_a_profile_that_extends_the_serving_one(tmp_path: Path) -> None:
    prof = _profile()
    a = _advise(_situation(prof, _mtp_card(), concurrency=19))
    best = a.proposals[0]
    path = advice.write_accepted(prof.name, best, tmp_path)
    child = get_profile(best.name, [tmp_path])
    assert child.extends == prof.name and child.launcher == prof.launcher
    assert child.server == {**prof.server, **best.delta}
    assert not [i for i in check_profile(child, CATALOG) if i.is_error]
    assert path.read_text().startswith("# Written by `sgltui advise`")


def test_sim_host_ram_is_the_simulated_host_less_what_is_pinned() -> None:
    prof = _profile()
    slot = protocol.SlotStatus(
        id="0",
        profile=prof.name,
        standbys=[protocol.StandbyView(profile="demo-no-mtp", host_bytes=60_000_000_000)],
    )
    host = protocol.HostView(ram_available_bytes=8 * GIB, server_pinned_bytes={"0": 5_000_000_000})
    assert advice_inputs.host_free_bytes(prof, slot, host) == 512e9 - 65e9
    job = protocol.JobView(
        id="j1",
        state="running",
        slot="0",
        input="in",
        output="out",
        errors_output="e",
        concurrency=12,
        concurrency_mode="auto",
        created=1.0,
        segments=[
            protocol.JobSegment(started=0, last=1, completions=10, out_tokens=5000, in_tokens=12000)
        ],
    )
    tel = protocol.TelemetryView(host=host, engine={"0": {"accept_length": 2.0}})
    s = advice_inputs.situation(prof, slot, tel, job, overrides={"concurrency": 30})
    assert (s.prompt_tokens, s.output_tokens, s.concurrency) == (1200, 500, 30)
    assert s.engine == {"accept_length": 2.0}


def test_the_ledger_keeps_accept_length_by_concurrency_for_the_advice() -> None:
    from sgltui.core.insight import MIN_LIVE_READINGS, Ledger

    ledger = Ledger()
    for i in range(MIN_LIVE_READINGS):
        ledger.observe_engine(
            "m", {"num_running_reqs": 1, "gen_throughput": 60 + i, "accept_length": 3.2}
        )
        ledger.observe_engine(
            "m", {"num_running_reqs": 8, "gen_throughput": 300 + i, "accept_length": 2.2}
        )
    ledger.observe_engine(
        "m", {"num_running_reqs": 16, "gen_throughput": 500, "accept_length": 2.0}
    )
    # a repeated reading is the same report: not counted again; one reading is not a measurement
    ledger.observe_engine(
        "m", {"num_running_reqs": 16, "gen_throughput": 500, "accept_length": 2.0}
    )
    assert ledger.figures("m").accept_by_c() == pytest.approx({1: 3.2, 8: 2.2})


def test_a_flag_written_at_what_the_pool_holds_counts_as_the_pool() -> None:
    """capacity.py names the flag when it equals the mamba cap (a raised profile): the pool is
    the limit, so hicache is proposed; raising the flag again is not."""
    prof = _profile()
    card = _mtp_card(mrr=10)
    card["requested_max_running_requests"] = 10
    card["bound"] = bound(card, {})
    assert card["bound"]["by"] == "flag"
    a = _advise(_situation(prof, card, host_free_bytes=700e9, concurrency=19))
    assert _rules(a) == ["hicache"]


def test_the_reports_why_names_the_bound_the_expectation_and_the_measurement() -> None:
    from sgltui.core import choice

    prof = _profile()
    a = _advise(_situation(prof, _mtp_card(), concurrency=19, host_free_bytes=700e9))
    every = [{**p.as_json(), "bound": a.bound} for p in a.proposals]
    every.append({"name": "demo-mtp+other", "delta": {"x": 1}, "reason": "r", "figure": "f"})
    raised = a.proposals[0].name
    decision = {
        "winner": raised,
        "advice": every,
        "candidates": [
            {"name": "demo-mtp", "state": "measured", "tok_s": 200.0, "requests": 300},
            {"name": raised, "state": "measured", "tok_s": 420.0, "ci_low": 410.0,
             "ci_high": 430.0, "requests": 500, "reason": "95% interval within +-5%"},
        ],
    }  # fmt: skip
    first, other = choice.why_paragraphs(decision)
    assert first.startswith(f"**{raised}** (max-running-requests = 10)")
    assert "bound by the flag: max-running-requests = 4" in first
    assert "memory allows 10" in first and "2.10x the serving profile's" in first
    assert first.endswith("It won.")
    assert other.endswith("Not tried: beyond --choose-max.")


# --- hicache first only where the job's prompts reuse prefixes the device pool cannot keep ----


def _reuse(contexts: int, prefix: float) -> Any:
    from sgltui.core.prefix_reuse import PrefixReuse

    return PrefixReuse(
        prompts=2000, shared_tokens=prefix, working_set_tokens=contexts * prefix, sharing=1.0
    )


def test_hicache_first_where_shared_prefixes_outgrow_the_device_pool() -> None:
    """The seed's MTP profile (flag at 4, the state pool holding 10) on a job whose prompts are
    400 shared 2,048-token contexts and a question: 819k tokens of prefixes against a 245k
    device pool, evicted and recomputed; a host pool keeps them, so hicache is first and the
    raise second (it shortens decode, not the prefill that dominates)."""
    prof = _profile()
    s = _situation(
        prof, _mtp_card(), host_free_bytes=700e9, prompt_tokens=2112, output_tokens=64,
        prefix=_reuse(400, 2048),
    )  # fmt: skip
    a = _advise(s)
    assert _rules(a)[:2] == ["hicache", "raise-max-running"], [p.as_json() for p in a.proposals]
    hc = a.proposals[0]
    assert hc.gain > a.proposals[1].gain > 1.0
    assert "max running stays 4" in hc.reason and "819,200 tokens" in hc.reason


def test_hicache_not_first_without_prefix_reuse() -> None:
    """The same profile and lengths, prompts sharing nothing (or prefixes the device pool keeps
    anyway): HiCache buys nothing (it does not raise max running), the raise comes first."""
    prof = _profile()
    base = dict(host_free_bytes=700e9, prompt_tokens=2112, output_tokens=64)
    none = _advise(_situation(prof, _mtp_card(), **base, prefix=_reuse(0, 0.0)))
    assert _rules(none)[0] == "raise-max-running" and "hicache" not in _rules(none)
    fits = _advise(_situation(prof, _mtp_card(), **base, prefix=_reuse(20, 2048)))
    assert _rules(fits)[0] == "raise-max-running", [p.as_json() for p in fits.proposals]
    # a KV-bound profile still gets it (the trial measures), after the raise when no reuse
    kv_bound = _card(max_running_requests=130_000)
    a = _advise(_situation(_profile("demo-base"), kv_bound, **base, prefix=_reuse(0, 0.0)))
    assert next(p for p in a.proposals if p.rule == "hicache").gain == pytest.approx(1.0)
