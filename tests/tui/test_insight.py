"""The insight card on the main screen (its own tab, key i): snapshots of a speculative and a
hicache profile from scripted, fixed-time sources, plus the feeding rules."""

from __future__ import annotations

import html

import pytest
from textual.widgets import TabbedContent

from sgltui.tui.widgets.insight import InsightPane
from tests.support.scripted import (
    CAPACITY,
    ScriptedSource,
    make_sample,
    make_slot,
    make_status,
)

from .helpers import app_with, until

MTP_CARD = dict(
    CAPACITY,
    requested_max_running_requests=4,
    speculative_algorithm="NEXTN",
    bound={"by": "flag", "text": "the flag: max-running-requests = 4"},
)
HICACHE_CARD = dict(
    MTP_CARD,
    hicache_host_gb=33.0,
    hicache_host_tokens=824320,
)
NO_MTP_CARD = dict(
    CAPACITY,
    max_running_requests=19,
    requested_max_running_requests=None,
    bound={
        "by": "mamba",
        "text": "mamba state slots: 98 slots / 5 per request (extra_buffer) = 19 running",
    },
)
BENCH = {
    "results": [
        {
            "profile": p,
            "concurrency": c,
            "capacity": card,
            "metrics": {"per_user_tok_s": per, "output_throughput": per * min(c, mrr)},
        }
        for p, card, mrr, points in (
            ("demo-mtp", MTP_CARD, 4, ((1, 64.0), (4, 52.0), (8, 52.0))),
            ("demo-no-mtp", NO_MTP_CARD, 19, ((1, 27.0), (4, 26.0), (8, 25.0), (16, 24.0))),
        )
        for c, per in points
    ]
}


pytestmark = pytest.mark.usefixtures("utc")


def _app(profile, card, engine_extra=None):
    def sample(t):
        s = make_sample(t)
        s["engine"]["0"].update(engine_extra or {})
        return s

    status = make_status([make_slot(profile=profile, capacity=card)])
    status["telemetry"]["engine"]["0"].update(engine_extra or {})
    return app_with(
        ScriptedSource(status, [{"push": "sample", "data": sample(t)} for t in range(1, 30)])
    )


def _settle(app, bench=None):
    async def run_before(pilot):
        await until(
            pilot, lambda: app.model.connected and len(app.model.series["gen_throughput"]) > 1
        )
        if bench:
            app.model.set_bench_result("run-1", bench)
        await pilot.press("i")
        pane = app.query_one(InsightPane)
        pane.show(app.model)
        # the proposal (core/advice.py) is worked out in a thread: the snapshot waits for it
        await until(pilot, lambda: pane.advice_runs > 0)
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()

    return run_before


def test_insight_speculative_profile(snap_compare):
    app = _app("demo-mtp", MTP_CARD, {"accept_rate": 0.54})
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settle(app, BENCH))


def test_insight_hicache_profile(snap_compare):
    engine = {
        "hicache_host_used_tokens": 96000,
        "hicache_host_total_tokens": 824320,
        "hicache_host_mamba_used_states": 9,
        "hicache_host_mamba_total_states": 25,
        "prefill_tokens_by_mode": {"input": 41000, "device_hit": 52000, "host_hit": 9000},
        "accept_rate": 0.54,
    }
    app = _app("demo-mtp-hicache", HICACHE_CARD, engine)
    bench = {
        "results": BENCH["results"]
        + [
            {
                "profile": "demo-mtp-hicache",
                "concurrency": c,
                "capacity": HICACHE_CARD,
                "metrics": {"per_user_tok_s": per, "output_throughput": per * min(c, 4)},
            }
            for c, per in ((1, 66.0), (4, 55.0))
        ]
    }
    assert snap_compare(app, terminal_size=(120, 40), run_before=_settle(app, bench))


async def test_readings_count_once_and_the_card_follows_the_running_profile():
    app = _app("demo-mtp", MTP_CARD)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 29)
        await pilot.pause(0.2)
        pane = app.query_one(InsightPane)
        figures = pane.ledger.figures("demo-mtp")
        readings = sum(n for _s, n in figures.live.values())
        pane.show(app.model)  # the same reading again (a status refresh): not counted twice
        assert sum(n for _s, n in figures.live.values()) == readings
        app.query_one(TabbedContent).active = "tab-insight"  # (the card is worked out when shown)
        await until(pilot, lambda: "demo-mtp" in pane._text)
        assert "demo-mtp" in pane._text and "the flag: max-running-requests = 4" in pane._text
        assert "accept length" in pane._text


async def test_the_hidden_tab_shows_what_came_in_while_hidden():
    """While the Logs tab is shown the Insight pane is fed but not repainted (a repaint of a
    hidden widget costs a layout of the whole screen); showing its tab paints the card."""
    app = _app("demo-mtp", MTP_CARD)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.query_one(TabbedContent).active == "tab-logs"
        await until(pilot, lambda: len(app.model.series["gen_throughput"]) >= 29)
        await pilot.pause(0.3)
        pane = app.query_one(InsightPane)
        # fed (the ledger has the readings) but not worked out into a card while hidden
        assert sum(n for _s, n in pane.ledger.figures("demo-mtp").live.values()) > 0
        assert "accept length" not in pane._text
        assert "accept length" not in app.export_screenshot()
        app.query_one(TabbedContent).active = "tab-insight"
        await pilot.pause(0.3)
        screen = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "bounds max running" in screen and "accept length" in screen


async def test_readings_kept_while_hidden_are_all_counted_in_order():
    """Issue 49: while its tab is hidden the pane keeps each sample's reading and feeds the
    ledger with them when it is read (in one go; also every FOLD_EVERY readings). What the
    ledger counts is what feeding every sample one by one counts: 59 samples, more than
    FOLD_EVERY, each drawn as the app draws a tick, and one drawn twice (counted once)."""
    from sgltui.core import insight
    from sgltui.tui.widgets import insight as pane_module

    samples = [make_sample(t, running=1 + int(t) % 4) for t in range(1, 60)]
    status = make_status([make_slot(profile="demo-mtp", capacity=MTP_CARD)])
    app = app_with(ScriptedSource(status, []))
    expected = insight.Ledger()
    for engine in [status["telemetry"]["engine"]["0"], *(s["engine"]["0"] for s in samples)]:
        expected.observe_engine("demo-mtp", engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected)
        await pilot.pause(0.3)
        assert app.query_one(TabbedContent).active == "tab-logs"
        pane = app.query_one(InsightPane)
        assert pane_module.FOLD_EVERY < len(samples)
        for i, sample in enumerate(samples):
            app.model.apply_push({"push": "sample", "data": sample})
            pane.show(app.model)  # (the app's draw of a tick)
            if i == 20:
                pane.show(app.model)  # the same reading again (a status refresh)
        assert pane.ledger.figures("demo-mtp").live == expected.figures("demo-mtp").live
        assert pane.ledger.figures("demo-mtp").accept == expected.figures("demo-mtp").accept


KV_BOUND_CARD = dict(
    CAPACITY,
    max_running_requests=206080,  # 412160 KV tokens / 2: the KV pool binds
    requested_max_running_requests=None,
    mamba_state_slots=None,
    bound={"by": "kv", "text": "KV pool: 412160 tokens / 2 = 206080 running"},
)


async def test_the_proposal_line_and_its_key_write_the_profile(tmp_path, monkeypatch):
    """A KV-bound profile on a host with RAM free: the pane proposes hicache (core/advice.py);
    P writes it as a profile extending the serving one and offers the swap, which s starts."""
    from sgltui.core import locations
    from sgltui.core.profiles import get_profile
    from sgltui.tui import swap
    from sgltui.tui.screens import AcceptChoice

    swapped: list[str] = []

    async def fake_swap(host, name):
        swapped.append(name)

    monkeypatch.setattr(swap, "swap_to", fake_swap)
    app = _app("demo-base", KV_BOUND_CARD)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected)
        await pilot.press("i")
        pane = app.query_one(InsightPane)
        await until(pilot, lambda: pane.advice_runs > 0 and "Proposal" in pane._text)
        assert pane.proposal is not None and pane.proposal.name == "demo-base+hicache"
        assert "demo-base+hicache" in pane._text and "P[/] accept" in pane._text
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, AcceptChoice))
        await pilot.press("s")
        await until(pilot, lambda: swapped == ["demo-base+hicache"])
    path = locations.config_dir() / "profiles" / "demo-base+hicache.toml"
    written = get_profile("demo-base+hicache")
    assert path.is_file() and written.extends == "demo-base"
    assert written.server["enable-hierarchical-cache"] is True
    assert written.server["hicache-ratio"] == pane.proposal.delta["hicache-ratio"]


async def test_the_accept_key_works_before_the_insight_tab_was_opened(tmp_path, monkeypatch):
    """P from the Logs tab, the Insight pane never shown (so never worked out): the proposal is
    worked out then, not refused with "no proposal"."""
    from sgltui.tui.screens import AcceptChoice

    app = _app("demo-base", KV_BOUND_CARD)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected and app.model.current is not None)
        pane = app.query_one(InsightPane)
        assert pane.advice is None and not pane.is_on_screen
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, AcceptChoice))
        assert pane.proposal is not None and pane.proposal.name == "demo-base+hicache"


async def test_no_raise_when_the_flag_binds_at_what_memory_holds():
    """The MTP card bound by its flag at 4 while its 12 state slots hold no more: nothing
    proposes raising the flag (the pool binds, so the line offers hicache, if anything)."""
    app = _app("demo-mtp", dict(MTP_CARD, mamba_slots_per_request=3))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.model.connected)
        await pilot.press("i")
        pane = app.query_one(InsightPane)
        await until(pilot, lambda: pane.advice_runs > 0)
        assert pane.proposal is None or pane.proposal.rule == "hicache", pane.proposal
        assert "+mrr" not in pane._text


def _reference_feed(ledger, seen, model):
    """The rules of feeding one reading, as the pane applied them sample by sample before its
    plan: every slot read afresh (the pane's plan must count the same)."""
    from sgltui import protocol
    from sgltui.protocol import SlotState

    serving = model.current
    if serving is None or serving.state not in (SlotState.READY, SlotState.DRAINING):
        ledger.interrupt()
    names = []
    for slot in model.slots:
        if not slot.profile or slot.state not in (SlotState.READY, SlotState.DRAINING):
            continue
        if slot.capacity is not None:
            ledger.observe_card(slot.profile, protocol.to_builtins(slot.capacity))
        engine = model.telemetry.engine.get(slot.id)
        if engine and seen.get(slot.profile) != engine.get("ts"):
            seen[slot.profile] = engine.get("ts")
            ledger.observe_engine(slot.profile, engine)
        if not model.several or slot.id == serving.id:
            names.append(slot.profile)
    return names


def test_the_hidden_panes_plan_follows_the_slots_and_the_slot_followed():
    """Issue 49: while hidden, the pane works out which slots a reading counts once per change
    of the slots or of the slot followed (a plan), not per reading. Fed as the app feeds it
    (a sample, then the draw), with a slot launching, the followed slot changing (to the
    launching one: no measurement spans it) and a new capacity card, it counts what feeding
    every reading afresh counts; readings repeat their figures, so a missed interruption
    shows. A plan kept across a change of the followed slot or of the slots fails."""
    from sgltui.core import insight
    from sgltui.tui.model import TuiModel
    from tests.support.scripted import make_host_status

    model = TuiModel()
    status = make_host_status(3, profiles=["demo-mtp", "demo-mtp", "demo-no-mtp"])
    model.apply_status(status)
    pane = InsightPane()
    expected, seen = insight.Ledger(), {}

    def sample(t):
        # each slot's running and throughput repeat every other second (a new ts each time)
        engine = {
            sid: {
                "ts": 1000.0 + t + i / 10,
                "num_running_reqs": 2 + i,
                "gen_throughput": 100.0 + 10 * i + (t // 2) % 2,
                "accept_length": 2.0 + i / 4,
            }
            for i, sid in enumerate("abc")
        }
        return {"push": "sample", "data": {"v": 1, "ts": 1000.0 + t, "engine": engine}}

    for t in range(1, 16):
        if t == 4:
            model.selected = "b"
        if t == 6:  # a launches (the slots change)
            status["slots"][0]["state"] = "launching"
            model.apply_status(status)
        if t == 8:
            model.selected = "a"  # the followed slot launches: every reading interrupts
        if t == 11:  # a is back with a new card; c's card changes too
            status["slots"][0]["state"] = "ready"
            status["slots"][2]["capacity"] = dict(
                status["slots"][2]["capacity"], max_running_requests=7
            )
            model.apply_status(status)
        model.apply_push(sample(t))
        pane.show(model)
        names = _reference_feed(expected, seen, model)
        if t == 5:
            pane.show(model)  # the same reading again (a status refresh)
            _reference_feed(expected, seen, model)
        if t in (5, 9, 15):  # read (folded) at times, as the accept key does
            for name in ("demo-mtp", "demo-no-mtp"):
                got, want = pane.ledger.figures(name), expected.figures(name)
                assert (got.live, got.accept, got.card) == (want.live, want.accept, want.card), t
            assert pane._shown_names == names, t


def test_a_hidden_panes_fold_counts_its_readings_in_one_conversion(monkeypatch):
    """Issue 49: the readings kept while the tab is hidden are counted in one batch
    (`Ledger.observe_engines`, their figures converted at once), not one `observe_engine`
    per slot and reading (~12 calls each, 8 slots a second); split only where the plan
    changes (a new card or profile lands in order) or a reading interrupts (the followed slot
    launching). What is counted is what feeding each reading afresh counts."""
    from sgltui.core import insight
    from sgltui.tui.model import TuiModel
    from sgltui.tui.widgets import insight as pane_module
    from tests.support.scripted import make_host_status

    def sample(t):
        engine = {
            sid: {
                "ts": 1000.0 + t + i / 10,
                "num_running_reqs": 1 + (t + i) % 3,
                "gen_throughput": 100.0 + t + i,
                "accept_length": 2.0 + i / 4,
            }
            for i, sid in enumerate("abc")
        }
        return {"push": "sample", "data": {"v": 1, "ts": 1000.0 + t, "engine": engine}}

    def play(feed):
        """A sample a second, the followed slot launching at 12 (and back at 13)."""
        model = TuiModel()
        status = make_host_status(3, profiles=["demo-mtp", "demo-mtp", "demo-no-mtp"])
        model.apply_status(status)
        for t in range(1, pane_module.FOLD_EVERY):  # one fold, when read
            if t in (12, 13):
                model.selected = "a"
                status["slots"][0]["state"] = "launching" if t == 12 else "ready"
                model.apply_status(status)
            model.apply_push(sample(t))
            feed(model)

    reference, seen = insight.Ledger(), {}
    play(lambda model: _reference_feed(reference, seen, model))
    one_by_one, batches = [], []
    real = insight.Ledger.observe_engines
    monkeypatch.setattr(insight.Ledger, "observe_engine", lambda self, *a: one_by_one.append(a))
    monkeypatch.setattr(
        insight.Ledger,
        "observe_engines",
        lambda self, readings, seen=None: (
            batches.append(len(readings)) or real(self, readings, seen)
        ),
    )
    pane = InsightPane()
    play(pane.show)
    assert batches == [] and one_by_one == []  # kept while hidden
    ledger = pane.ledger  # read: folded
    # 11 seconds of 3 slots; the launch's (a not counted); the 17 seconds after it
    assert batches == [33, 2, 51] and one_by_one == []
    for name in ("demo-mtp", "demo-no-mtp"):
        got, want = ledger.figures(name), reference.figures(name)
        assert got.live and (got.live, got.accept) == (want.live, want.accept), name


def test_a_status_polled_again_keeps_the_plan_and_its_cards(monkeypatch):
    """Issue 49: a STATUS polled again makes equal slots anew (every few seconds): the plan
    is kept (the slots compared by value), so no capacity card is converted and fed again;
    a slot that reads differently (a new card) is a new plan, its card fed."""
    from sgltui.core import insight
    from sgltui.tui.model import TuiModel
    from tests.support.scripted import make_host_status

    cards = []
    real = insight.Ledger.observe_card
    monkeypatch.setattr(
        insight.Ledger,
        "observe_card",
        lambda self, name, card: cards.append(name) or real(self, name, card),
    )
    model = TuiModel()
    status = make_host_status(3, profiles=["demo-mtp", "demo-mtp", "demo-no-mtp"])
    model.apply_status(status)
    pane = InsightPane()
    pane.show(model)
    assert pane.ledger  # (folded)
    assert len(cards) == 3
    for _ in range(3):
        model.apply_status(status)  # equal slots, made anew
        pane.show(model)
    assert pane.ledger
    assert len(cards) == 3
    status["slots"][2]["capacity"] = dict(status["slots"][2]["capacity"], max_running_requests=7)
    model.apply_status(status)
    pane.show(model)
    assert pane.ledger.figures("demo-no-mtp").card["max_running_requests"] == 7
    assert len(cards) == 6  # (a new plan: each serving slot's card looked at again)


def test_a_hidden_panes_readings_cost_few_calls_and_count_as_afresh():
    """Issue 49, thirteenth round: a hidden pane keeps a sample's reading as a plain tuple
    (its slots, the slot selected, `several`, the engine readings: no NamedTuple, no
    current_id) and its fold gathers a run's slot readings in one comprehension and counts
    them inline (`Ledger.observe_engines` with the pane's stamps: no `_count`, no dict.get,
    no append per slot and reading). 30 readings of 8 slots, some repeated (a status
    refresh), one slot's reading missing and one empty, the selection moved: what is
    counted is what feeding each reading afresh counts, in few calls."""
    import sys

    from sgltui.core import insight
    from sgltui.tui.model import TuiModel
    from sgltui.tui.widgets import insight as pane_module
    from tests.support.scripted import make_host_status

    status = make_host_status(8, profiles=["demo-mtp"] * 4 + ["demo-no-mtp"] * 4)
    ids = [str(s["id"]) for s in status["slots"]]

    def sample(t):
        engine = {
            sid: {
                "ts": 1000.0 + t + i / 10,
                "num_running_reqs": 1 + (t + i) % 3,
                "gen_throughput": 100.0 + t * 3 + i,
                "accept_length": 2.0 + (t % 4) / 4,
            }
            for i, sid in enumerate(ids)
        }
        if t % 5 == 0:
            del engine[ids[1]]  # no reading of this slot this second
        if t % 7 == 0:
            engine[ids[2]] = {}  # an empty one
        return {"push": "sample", "data": {"v": 1, "ts": 1000.0 + t, "engine": engine}}

    def play(feed, model):
        model.apply_status(status)
        for t in range(1, 21):  # (25 readings: fewer than FOLD_EVERY, folded when read)
            if t == 17:
                model.selected = ids[5]
            model.apply_push(sample(t))
            feed(model)
            if t % 4 == 0:
                feed(model)  # the same reading again

    reference, seen = insight.Ledger(), {}
    play(lambda model: _reference_feed(reference, seen, model), TuiModel())
    pane, model = InsightPane(), TuiModel()
    play(pane.show, model)
    calls = []

    def count(frame, event, arg):
        if event in ("call", "c_call"):
            calls.append(frame.f_code.co_name if event == "call" else getattr(arg, "__name__", ""))

    assert pane_module.FOLD_EVERY > 25 and len(pane._pending) == 25
    insight.Ledger().observe_engines([("p", {"num_running_reqs": 1})])  # (msgspec's first)
    sys.setprofile(count)
    try:
        ledger = pane.ledger  # read: folded
    finally:
        sys.setprofile(None)
    # (the first plan feeds 8 cards; the per reading work is none but its plan's check)
    assert "_count" not in calls and calls.count("append") <= 30, calls
    assert len(calls) <= 150, (len(calls), calls)  # (~850 before: ~34 a reading of 8 slots)
    for name in ("demo-mtp", "demo-no-mtp"):
        got, want = ledger.figures(name), reference.figures(name)
        assert got.live and (got.live, got.accept, got.engine) == (
            want.live,
            want.accept,
            want.engine,
        ), name
