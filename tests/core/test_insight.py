"""The insight card's computation: comparisons only where both profiles were measured."""

from __future__ import annotations

from sgltui.core.insight import Ledger, card

MTP_CARD = {
    "max_running_requests": 4,
    "speculative_algorithm": "NEXTN",
    "bound": {"by": "flag", "text": "the flag: max-running-requests = 4"},
}
PLAIN_CARD = {
    "max_running_requests": 19,
    "bound": {"by": "mamba", "text": "mamba state slots: 98 slots / 5 per request = 19 running"},
}


def _live(ledger, name, running, throughput, n=3, **extra):
    for i in range(n):  # n distinct reports averaging `throughput`
        value = throughput + i - (n - 1) / 2
        ledger.observe_engine(name, {"num_running_reqs": running, "gen_throughput": value, **extra})


def test_speculative_verdict_per_request_speedup_then_where_the_baseline_wins():
    ledger = Ledger()
    ledger.observe_card("demo-mtp", MTP_CARD)
    ledger.observe_card("demo-no-mtp", PLAIN_CARD)
    _live(ledger, "demo-mtp", 1, 60.0, accept_length=2.8, accept_rate=0.6)
    _live(ledger, "demo-no-mtp", 1, 25.0)
    ledger.observe_bench(
        {
            "results": [
                {
                    "profile": "demo-mtp",
                    "concurrency": 4,
                    "metrics": {"per_user_tok_s": 45.0, "output_throughput": 180.0},
                },
                {
                    "profile": "demo-no-mtp",
                    "concurrency": 8,
                    "metrics": {"per_user_tok_s": 24.0, "output_throughput": 190.0},
                },
            ]
        }
    )
    c = card(ledger, "demo-mtp")
    assert c["kinds"] == ["speculative"] and c["bound"] == "the flag: max-running-requests = 4"
    (section,) = c["sections"]
    assert section["lines"] == [
        "accept length 2.80, rate 60%",
        "per request vs demo-no-mtp: 2.4x at c=1",
    ]
    assert section["verdict"] == (
        "MTP 2.4x per request at c=1, but max running 4: at c>=8 demo-no-mtp finishes the job first"
    )
    # The baseline itself is neither speculative nor hicache: only its bound line.
    assert card(ledger, "demo-no-mtp") == {
        "profile": "demo-no-mtp",
        "kinds": [],
        "bound": PLAIN_CARD["bound"]["text"],
        "sections": [],
    }


def test_speculative_without_a_comparable_baseline_says_what_is_missing():
    ledger = Ledger()
    ledger.observe_card("mtp", MTP_CARD)
    _live(ledger, "mtp", 2, 90.0, accept_length=2.5)
    verdict = card(ledger, "mtp")["sections"][0]["verdict"]
    assert verdict.startswith("no non-speculative profile measured yet")
    ledger.observe_card("no-mtp", PLAIN_CARD)
    _live(ledger, "no-mtp", 3, 60.0)
    verdict = card(ledger, "mtp")["sections"][0]["verdict"]
    assert (
        verdict
        == "not yet comparable with no-mtp at the same concurrency (this one measured at c=2)"
    )
    _live(ledger, "no-mtp", 2, 50.0, n=2)  # fewer than 3 readings do not count
    assert "not yet comparable" in card(ledger, "mtp")["sections"][0]["verdict"]


def test_hicache_section_host_pool_hit_rate_by_source_and_unchanged_concurrency():
    ledger = Ledger()
    ledger.observe_card("demo-mtp", MTP_CARD)
    ledger.observe_card("demo-mtp-hicache", dict(MTP_CARD, hicache_host_gb=33.0))
    ledger.observe_engine(
        "demo-mtp-hicache",
        {
            "num_running_reqs": 0,
            "hicache_host_used_tokens": 12800,
            "hicache_host_total_tokens": 520000,
            "hicache_host_mamba_used_states": 7,
            "hicache_host_mamba_total_states": 103,
            "prefill_tokens_by_mode": {"input": 500, "device_hit": 1200, "host_hit": 300},
            "accept_length": 2.6,
        },
    )
    c = card(ledger, "demo-mtp-hicache")
    assert c["kinds"] == ["speculative", "hicache"]
    hicache = c["sections"][1]
    assert hicache["lines"] == [
        "host pool 12.8k / 520k tokens, mamba states 7 / 103",
        "hit rate device 60%, host 15%; prefill tokens saved 1.50k",
    ]
    assert hicache["verdict"] == (
        "max running 4 (without HiCache, demo-mtp: 4): HiCache saves prefill, it does not raise concurrency"
    )


def test_a_repeated_report_counts_once():
    """SGLang republishes gen_throughput only every decode-log-interval steps: reading the same
    (running, throughput) pair again is not a new measurement."""
    ledger = Ledger()
    for _ in range(10):
        ledger.observe_engine("p", {"num_running_reqs": 2, "gen_throughput": 500.0})
    f = ledger.figures("p")
    assert f.live == {2: [250.0, 1]} and f.concurrencies() == set()
    ledger.observe_engine("p", {"num_running_reqs": 2, "gen_throughput": 520.0})
    ledger.observe_engine("p", {"num_running_reqs": 2, "gen_throughput": 480.0})
    assert f.concurrencies() == {2} and f.per_request(2) == 250.0
    ledger.interrupt()  # a swap: the next reading counts even if it repeats the pair
    ledger.observe_engine("p", {"num_running_reqs": 2, "gen_throughput": 480.0})
    assert f.live[2][1] == 4


def test_readings_counted_in_one_go_count_what_one_by_one_counts():
    """Issue 49: `observe_engines` converts a batch's figures at once (no type check or get
    per reading) and counts what `observe_engine` of each counts, in order: counts as floats
    or ints, a repeated pair, fractional, zero, negative, NaN and infinite counts, a missing
    throughput or accept length, an empty reading. A batch with a value msgspec does not
    convert (a bool, a string) is read one by one, with the same result."""
    readings = [
        {"num_running_reqs": 2, "gen_throughput": 500.0, "accept_length": 2.5, "ts": 1},
        {"num_running_reqs": 2, "gen_throughput": 500.0, "accept_length": 2.9},  # repeated
        {"num_running_reqs": 2.0, "gen_throughput": 510, "accept_length": 3},
        {"num_running_reqs": 3.5, "gen_throughput": 600.0, "accept_length": 2.0},
        {"num_running_reqs": 0, "gen_throughput": 10.0},
        {"num_running_reqs": -1, "gen_throughput": 10.0},
        {"num_running_reqs": float("nan"), "gen_throughput": 10.0},
        {"num_running_reqs": float("inf"), "gen_throughput": 10.0},
        {"num_running_reqs": 4, "accept_length": 1.5},
        {"num_running_reqs": 4, "gen_throughput": 0.0, "accept_length": 1.7},
        {"num_running_reqs": 4.0, "gen_throughput": 800.0},
        {},
        {"gen_throughput": 90.0},
    ]
    for odd in ([], [{"num_running_reqs": True, "gen_throughput": 5.0}], [{"x": 1, 5: 2}]):
        batch = [("p" if i % 3 else "q", r) for i, r in enumerate([*readings, *odd])]
        one_by_one, at_once = Ledger(), Ledger()
        for name, engine in batch:
            one_by_one.observe_engine(name, engine)
        at_once.observe_engines(batch)
        for name in ("p", "q"):
            want, got = one_by_one.figures(name), at_once.figures(name)
            assert (got.live, got.accept, got.engine) == (want.live, want.accept, want.engine)
            if not odd:  # (counts as ints, as observe_engine keeps them: c=2, not c=2.0)
                assert all(type(c) is int for c in [*got.live, *got.accept])
            assert got.last_pair == want.last_pair
        # a pair repeated after the batch is the same report
        at_once.observe_engines([("p", dict(batch[-1][1]))])
        one_by_one.observe_engine("p", dict(batch[-1][1]))
        assert at_once.figures("p").live == one_by_one.figures("p").live


def test_readings_counted_in_one_go_skip_the_stamps_their_profile_counted_last():
    """Issue 49, thirteenth round: `observe_engines(readings, seen)` skips a reading whose
    stamp its profile counted last, as the Insight pane did reading by reading before it
    batched them (a status refresh repeats a reading): an empty reading skipped before its
    stamp is noted, a first reading with no stamp skipped (as if counted), a skipped reading
    never reaching its profile's figures. The same with a batch read one by one (a bool)."""
    base = [
        ("p", {"num_running_reqs": 2, "gen_throughput": 500.0, "ts": 1}),
        ("p", {"num_running_reqs": 3, "gen_throughput": 600.0, "ts": 1}),  # repeated stamp
        ("q", {"num_running_reqs": 2, "gen_throughput": 100.0}),  # no stamp, first: skipped
        ("p", {}),  # empty: skipped, its (absent) stamp not noted
        ("p", {"num_running_reqs": 3, "gen_throughput": 610.0, "ts": 1}),  # still ts 1
        ("q", {"num_running_reqs": 2, "gen_throughput": 120.0, "ts": 5, "accept_length": 2}),
        ("p", {"num_running_reqs": 3, "gen_throughput": 620.0, "ts": 2}),
        ("r", {"num_running_reqs": 1, "gen_throughput": 50.0}),  # never counted: no figures
    ]
    for odd in ([], [("q", {"num_running_reqs": True, "ts": 9})]):
        batch = [*base, *odd]
        want, seen_want = Ledger(), {}
        for name, engine in batch:  # the pane's rule before (widgets/insight.py)
            stamp = engine.get("ts") if engine else None
            if engine and seen_want.get(name) != stamp:
                seen_want[name] = stamp
                want.observe_engine(name, engine)
        got, seen = Ledger(), {}
        got.observe_engines(batch, seen)
        assert seen == seen_want and set(got.profiles) == set(want.profiles) == {"p", "q"}
        for name in ("p", "q"):
            g, w = got.figures(name), want.figures(name)
            assert (g.live, g.accept, g.engine, g.last_pair) == (
                w.live,
                w.accept,
                w.engine,
                w.last_pair,
            )
