"""TuiModel: which push changes what, bounded history, who issued a command."""

import msgspec

from sgltui import protocol
from sgltui.tui import model as M
from sgltui.tui.model import TuiModel
from tests.support.scripted import T0, make_engine, make_sample, make_slot, make_status


def ev(type_, **fields):
    return {
        "push": "event",
        "data": {"v": 1, "ts": 100.0, "type": type_, "client": None, "slot": "0", **fields},
    }


def test_samples_feed_bounded_series_in_time_order():
    m = TuiModel(history_points=10)
    m.apply_status(make_status())
    for t in range(1, 30):
        assert {M.MEMORY, M.CHART} <= m.apply_push({"push": "sample", "data": make_sample(t)})
    assert len(m.series["gen_throughput"]) == 10
    ts = [t for t, _ in m.series["running"]]
    assert ts == sorted(ts) and ts[-1] == make_sample(29)["ts"]
    # A late (older) sample must not go into the chart out of order.
    m.apply_push({"push": "sample", "data": make_sample(5)})
    assert m.series["running"][-1][0] == make_sample(29)["ts"]
    assert m.telemetry.gpus[0].simulated is True


def test_slot_events_patch_state_and_ask_for_a_fresh_status():
    m = TuiModel()
    m.apply_status(make_status([make_slot(state="launching", phase="spawned")]))
    push = ev("slot.phase", phase="loading weights", progress=0.4, eta_s=12.0)
    assert M.SERVERS in m.apply_push(push)
    assert m.slot("0").phase == "loading weights" and m.slot("0").eta_s == 12.0
    assert m.needs_status_refresh(push)
    cause = {
        "kind": "oom",
        "summary": "CUDA out of memory",
        "fix": "lower --mem-fraction-static",
        "lines": [],
    }
    m.apply_push(ev("slot.state", state="failed", prev="launching", cause=cause))
    assert m.slot("0").state == "failed" and m.slot("0").cause.kind == "oom"
    assert m.activity[-1].level == "error" and "CUDA out of memory" in m.activity[-1].text
    assert not m.needs_status_refresh({"push": "sample", "data": make_sample(1)})


def test_swap_steps_show_then_clear():
    m = TuiModel()
    m.apply_status(make_status())
    m.apply_push(
        ev(
            "swap.step",
            **{"from": "demo-mtp", "to": "demo-no-mtp", "step": "draining", "elapsed_s": 0.5},
        )
    )
    assert m.slot("0").swap.step == "draining"
    m.apply_push(
        ev(
            "swap.done",
            **{
                "from": "demo-mtp",
                "to": "demo-no-mtp",
                "ok": True,
                "rolled_back": False,
                "timings_s": {"total": 4.2},
            },
        )
    )
    assert m.slot("0").swap is None
    assert "in 4.20 s" in m.activity[-1].text


def test_commands_from_other_clients_are_marked_foreign():
    m = TuiModel(own_client="tui:1@h")
    m.apply_status(make_status())
    m.apply_push(
        ev(
            "command",
            client="cli:9@h",
            op="swap",
            args={"profile": "demo-no-mtp", "profiles_dirs": []},
        )
    )
    m.apply_push(ev("command", client="tui:1@h", op="stop", args={"slot": "0"}))
    theirs, mine = list(m.activity)[-2:]
    assert theirs.foreign and theirs.client == "cli:9@h" and theirs.text == "swap to demo-no-mtp"
    assert not mine.foreign
    assert m.activity_total == 2


def test_activity_is_bounded_but_counts_everything():
    m = TuiModel(activity_items=5)
    for _ in range(12):
        m.apply_push(ev("command", client="cli:1@h", op="ping", args={}))
    assert len(m.activity) == 5 and m.activity_total == 12


def test_bench_events_track_a_run():
    m = TuiModel()
    m.apply_push(ev("bench.start", run_id="r1"))
    m.apply_push(
        ev("bench.progress", run_id="r1", profile="demo-mtp", concurrency=4, point=1, points=3)
    )
    assert m.bench["r1"].state == "running" and m.bench["r1"].progress.concurrency == 4
    m.apply_push(ev("bench.done", run_id="r1", path="/x/r1.json", state="done"))
    assert m.bench["r1"].state == "done" and m.bench["r1"].path == "/x/r1.json"


def test_running_requests_and_profile_keys():
    m = TuiModel()
    m.apply_status(make_status())
    eng = m.engine("0")
    assert m.running_requests("0") == eng["num_running_reqs"] + eng["num_queue_reqs"]
    assert m.profile_for_key("2").name == "demo-mtp"
    assert m.profile_for_key("9") is None


def test_a_reading_from_before_ready_counts_no_request_in_flight():
    """The server's warm-up request, seen by a scrape during the launch, is nobody's request:
    a swap key pressed right after ready must not ask how to drain it."""
    m = TuiModel()
    st = make_status([make_slot(state="ready", ready_at=T0 + 10.0)])
    st["telemetry"]["engine"]["0"] = make_engine(5.0, running=1)  # ts T0+5: during warm-up
    m.apply_status(st)
    assert m.running_requests("0") == 0
    st["telemetry"]["engine"]["0"] = make_engine(11.0, running=1)  # after ready: it counts
    m.apply_status(st)
    assert m.running_requests("0") == 1 + st["telemetry"]["engine"]["0"]["num_queue_reqs"]


def test_the_memory_view_shows_the_host_cpu_as_top_does_each_3_s_mean():
    """Every sample is kept as recorded; the figure the pane draws is the first one (the
    snapshot's 12%), then the mean of each 3 s window, so an idle screen is not repainted for
    a CPU point every second."""
    model = TuiModel()
    model.apply_status(make_status())  # ts T0, cpu 12%
    shown = []
    for t, pct in [(1, 10.0), (2, 70.0), (3, 4.0), (4, 36.0), (5, 20.0), (6, 10.0)]:
        sample = make_sample(t)
        sample["host"] = dict(sample["host"], cpu_pct=pct)
        model.apply_push({"push": "sample", "data": sample})
        assert model.telemetry.host.cpu_pct == pct  # the record is untouched
        shown.append(model.memory_view.host.cpu_pct)
    # 12 until T0+3 closes the first window: (12 + 10 + 70 + 4) / 4; then (36 + 20 + 10) / 3
    assert shown == [12.0, 12.0, 24.0, 24.0, 24.0, 22.0]
    model.apply_push({"push": "sample", "data": sample})  # the same sample again: ignored
    assert model.memory_view.host.cpu_pct == 22.0


def two_slots():
    st = make_status([make_slot(id="a"), make_slot("demo-no-mtp", id="b")])
    st["telemetry"]["engine"] = {"a": make_engine(0.0, running=2), "b": make_engine(0.0, running=3)}
    st["pools"] = [{"name": "all", "endpoint": "http://127.0.0.1:30080", "slots": ["a", "b"]}]
    return st


def test_every_slot_is_kept_by_name_and_the_chart_sums_them():
    m = TuiModel()
    m.apply_status(two_slots())
    assert m.slot_ids == ["a", "b"] and m.several and m.current_id == "a"
    assert m.pool_of("b").name == "all" and m.pool_slots("all") == ["a", "b"]
    sample = make_sample(1)
    sample["engine"] = {"a": make_engine(1.0, running=2), "b": make_engine(1.0, running=3)}
    m.apply_push({"push": "sample", "data": sample})
    gen = sample["engine"]["a"]["gen_throughput"] + sample["engine"]["b"]["gen_throughput"]
    assert m.series["gen_throughput"][-1][1] == gen and m.series["running"][-1][1] == 5
    assert [v for _, v in m.slot_series["b"]][-1] == sample["engine"]["b"]["gen_throughput"]
    assert set(m.chart_slots()) == {"a", "b"}
    # An event of slot b changes b alone; its swap is marked with its name.
    push = ev("slot.state", slot="b", state="draining", prev="ready")
    assert M.SERVERS in m.apply_push(push)
    assert m.slot("b").state == "draining" and m.slot("a").state == "ready"
    m.apply_push(ev("swap.done", slot="b", to="demo-mtp", ok=True, **{"from": "demo-no-mtp"}))
    assert m.chart_marks()[-1][1] == "b:demo-mtp"
    m.selected = "b"
    assert m.current.id == "b" and m.running_requests("b") > 0


def test_the_charts_figures_of_every_slot_read_in_one_conversion_as_one_by_one():
    """Issue 49: a sample's chart figures are read out of every slot's reading in one
    conversion. The totals are the rules' (throughput and requests summed, KV usage the mean
    of the slots reporting it, accept length the mean of those above 0), a figure a reading
    lacks counts nowhere, and a sample with a reading that is no object or has keys that are
    no names still charts every reading as one by one did (the conversion refuses those)."""
    m = TuiModel()
    m.apply_status(two_slots())
    engine = {
        "a": {
            "ts": 1.0,
            "gen_throughput": 100,
            "num_running_reqs": 2.0,
            "token_usage": 0.5,
            "accept_length": 3.0,
        },
        "b": {"ts": 1.0, "gen_throughput": 50.5, "num_queue_reqs": 4, "accept_length": 0},
    }
    m.apply_push({"push": "sample", "data": {"v": 1, "ts": T0 + 1, "engine": engine}})
    last = {name: values[-1][1] for name, values in m.series.items()}
    assert last == {
        "gen_throughput": 150.5,
        "running": 2.0,
        "queued": 4.0,
        "token_usage": 0.5,
        "accept_length": 3.0,
    }
    assert m.slot_series["b"][-1][1] == 50.5
    odd = {**engine, "c": None, "d": {1: "x", "gen_throughput": 7, "token_usage": 0.25}}
    m.apply_push({"push": "sample", "data": {"v": 1, "ts": T0 + 2, "engine": odd}})
    last = {name: values[-1][1] for name, values in m.series.items()}
    assert last["gen_throughput"] == 157.5 and last["token_usage"] == 0.375
    assert [v for _, v in m.slot_series["d"]] == [7.0] and "c" not in m.slot_series
    assert M.total_engine(list(engine.values())) == {
        "gen_throughput": 150.5,
        "running": 2.0,
        "queued": 4.0,
        "token_usage": 0.5,
        "accept_length": 3.0,
    }


def test_one_slot_has_no_series_per_slot_and_plain_marks():
    m = TuiModel()
    m.apply_status(make_status())
    m.apply_push(ev("swap.done", to="demo-no-mtp", ok=True, **{"from": "demo-mtp"}))
    assert not m.several and m.chart_slots() == {} and m.chart_marks()[-1][1] == "demo-no-mtp"


def job(**extra):
    return {
        "id": "j1", "name": "big", "state": "running", "slot": "0", "input": "in.jsonl",
        "output": "out.jsonl", "errors_output": "err.jsonl", "concurrency": 4,
        "concurrency_mode": "fixed", "total": 100, "answered": 10, "created": T0,
        "rate_history": [[T0, 50.0]], **extra,
    }  # fmt: skip


def test_job_events_fold_into_the_jobs_the_status_listed():
    m = TuiModel()
    st = make_status()
    st["jobs"] = [job()]
    assert M.JOBS in m.apply_status(st)
    assert m.shown_job.answered == 10 and m.jobs_active
    m.apply_push(ev("job.progress", job="j1", answered=40, failed=1, tok_s=80.0, in_flight=4))
    view = m.jobs["j1"]
    assert (view.answered, view.failed, view.in_flight) == (40, 1, 4)
    assert view.rate_history[-1] == (100.0, 80.0)
    m.apply_push(ev("job.pause", job="j1"))
    assert m.jobs["j1"].state == "paused"
    m.apply_push(ev("job.hold", job="j1", reason="swap"))
    assert m.jobs["j1"].hold == "swap"
    done = ev("job.done", job="j1", state="done", answered=99, failed=1)
    m.apply_push(done)
    assert m.jobs["j1"].state == "done" and not m.jobs_active
    assert m.job_needs_reading(done) == "j1"  # its segments and ETA: read in full
    assert m.job_needs_reading(ev("job.progress", job="zz")) == "zz"  # a job not read yet


def test_activity_says_a_command_in_words_not_its_raw_arguments():
    """Issue 51 item 14: Activity printed `swap slot=0 force=[] ... confirm=Fal`."""
    from sgltui.tui.activity_items import activity_item

    ev = {"type": "command", "ts": 1.0, "client": "cli:1@h", "op": "swap",
          "args": {"slot": "0", "profile": "demo-no-mtp", "force": ["port"], "drain": "force",
                   "rollback": True, "wait": True, "confirm": True, "profiles_dirs": ["/p"]}}  # fmt: skip
    item = activity_item(protocol.decode_event(ev), "tui", lambda: 1.0)
    assert item is not None
    assert item.text == (
        "swap to demo-no-mtp on slot 0 (drain force, skipping the port check, confirmed)"
    )
    plain = dict(ev, args={"slot": "0", "profile": "demo-no-mtp", "force": [], "confirm": False})
    assert (
        activity_item(protocol.decode_event(plain), "tui", lambda: 1.0).text
        == "swap to demo-no-mtp on slot 0"
    )


def test_a_pool_roll_ends_with_its_total_time(monkeypatch, capsys):
    """Issue 51 item 14: a pool's roll ended without its total time (a swap says its own): the
    Activity line and `sgltui swap --pool`'s last line say how long the roll took."""
    import argparse

    from sgltui.commands import server
    from sgltui.tui.activity_items import activity_item

    end = {"type": "pool.roll", "ts": 9.0, "pool": "all", "step": "end", "profile": "b",
           "total_s": 42.5}  # fmt: skip
    assert (
        activity_item(protocol.decode_event(end), "tui", lambda: 9.0).text
        == "pool all: roll done in 42.5 s"
    )
    reply = {"pool": {"slots": [], "roll": {"state": "done", "profile": "b", "done": ["a", "b"],
                                            "started": 100.0, "finished": 142.5}}}  # fmt: skip
    monkeypatch.setattr(server, "call_sync", lambda *a, **k: reply)
    args = argparse.Namespace(pool="all", no_wait=False, state_dir=None, profiles=None)
    assert server._pool_lifecycle(args, protocol.SwapArgs(profile="b")) == 0
    assert capsys.readouterr().out.strip() == "pool all: rolled to b (a, b) in 42.5 s"


def test_a_whole_sample_reads_as_its_parts_and_counts_few_calls():
    """Issue 49: a sample carrying all its parts (the agent's, each second) is read in one
    conversion, its GPU source kept from the STATUS; the chart's totals are summed in one
    pass over the slots. What it reads is what reading its parts one by one reads (a sample
    missing one: the path kept for it), and 8 slots' sample costs the model few calls
    (~65 before: a list and a sum per series, the parts picked and read back)."""
    import sys

    import pytest

    from tests.support.scripted import make_host_sample, make_host_status

    ids = [str(i) for i in range(8)]
    whole, parts = TuiModel(), TuiModel()
    for m in (whole, parts):
        m.apply_status(make_host_status(8))
    source = whole.telemetry.gpu_source
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event in ("call", "c_call")

    for t in range(1, 4):
        sample = make_host_sample(float(t), ids)
        sample["engine"]["3"]["accept_length"] = 0.0  # (no speculative decoding: not meant)
        sys.setprofile(count)
        try:
            whole.apply_push({"push": "sample", "data": sample})
        finally:
            sys.setprofile(None)
        for key in ("gpus", "host", "engine", "ts"):  # each part alone, then the rest
            parts.apply_push({"push": "sample", "data": {k: sample[k] for k in (key,)}})
    assert whole.telemetry.gpu_source == source
    assert (whole.telemetry.gpus, whole.telemetry.host, whole.telemetry.engine) == (
        parts.telemetry.gpus,
        parts.telemetry.host,
        parts.telemetry.engine,
    )
    engines = list(sample["engine"].values())
    total = M.total_engine(engines)
    # (approx: sum() of floats compensates its rounding from Python 3.12 on)
    assert total["gen_throughput"] == pytest.approx(
        sum(float(e["gen_throughput"]) for e in engines)
    )
    spec = [float(e["accept_length"]) for e in engines if e.get("accept_length")]
    assert total["accept_length"] == pytest.approx(sum(spec) / len(spec))
    assert whole.series["gen_throughput"][-1] == (sample["ts"], total["gen_throughput"])
    assert calls <= 3 * 45, calls


def test_a_decoded_sample_costs_the_model_its_appends_and_two_conversions():
    """Issue 49, thirteenth round: the app's sample push (decoded) is read into the telemetry
    in one conversion (its GPU source kept, no telemetry_view, no replace), its figures in a
    second, and each slot's series is appended as the totals are summed (no dict of totals,
    no second pass): 8 slots cost 13 appends and ~8 calls more (~45 before). What is kept is
    what the rules of the parts and of `total_engine` say, to the bit; a sample whose host is
    empty or whose GPU does not read is read leniently, as telemetry_view reads it."""
    import sys

    from sgltui.tui.source import decode_push
    from tests.support.scripted import make_host_sample, make_host_status

    ids = [str(i) for i in range(8)]
    m = TuiModel()
    m.apply_status(make_host_status(8))
    source = m.telemetry.gpu_source
    counts = []
    for t in range(1, 4):
        sample = make_host_sample(float(t), ids)
        sample["engine"]["3"]["accept_length"] = 0.0
        del sample["engine"]["5"]["gen_throughput"]
        push = decode_push({"push": "sample", "data": sample})
        calls = []

        def count(frame, event, arg, calls=calls):
            if event in ("call", "c_call"):
                calls.append(frame.f_code.co_name if event == "call" else arg.__qualname__)

        sys.setprofile(count)
        try:
            assert m.apply_push(push) == {M.MEMORY, M.CHART}
        finally:
            sys.setprofile(None)
        counts.append(len(calls))
        assert calls.count("deque.append") == 13, calls
        assert "telemetry_view" not in calls and "replace" not in calls, calls
        total = M.total_engine(list(sample["engine"].values()))
        assert {n: m.series[n][-1] for n in M.SERIES} == {
            n: (sample["ts"], total[n]) for n in M.SERIES
        }
        gens = {sid: m.slot_series[sid][-1] for sid in ids}
        assert gens == {
            sid: (sample["ts"], float(e.get("gen_throughput") or 0.0))
            for sid, e in sample["engine"].items()
        }
        assert m.telemetry == protocol.telemetry_view(
            dict(sample, gpu_source=protocol.to_builtins(source))
        )
        assert m.telemetry.gpu_source is source
    assert max(counts) <= 24, counts
    for k, odd in enumerate(({"host": {}}, {"gpus": [{"index": "x"}, *sample["gpus"][1:]]})):
        sample = {**make_host_sample(9.0 + k, ids), **odd}
        m.apply_push(decode_push({"push": "sample", "data": sample}))
        want = protocol.telemetry_view(sample)
        assert m.telemetry == msgspec.structs.replace(want, gpu_source=source), odd


def test_events_the_reducer_keeps_the_state_for_are_not_folded(monkeypatch):
    """Issue 49, thirteenth round: a command (one every few seconds from each client), a
    refusal or an event this version does not know leaves every slot as it was: the model
    does not ask the reducer (protocol.apply gives the state back as it is for these, ~15
    calls an event) and still lists it in Activity. An event that changes a slot is folded."""
    from sgltui.protocol import history

    m = TuiModel()
    m.apply_status(make_status())
    state = m.state
    events = [
        ev("command", op="status", args={}),
        ev("command.refused", op="swap", message="no"),
        ev("no.such.event", what=1),
    ]
    for push in events:
        event = protocol.decode_event(push["data"])
        assert type(event) in M._SAME_STATE, type(event)
        assert protocol.apply(state, event) is state  # the reducer's rule this relies on
    folded = []
    real = history.apply
    monkeypatch.setattr(M.protocol, "apply", lambda s, e: folded.append(type(e)) or real(s, e))
    total = m.activity_total
    for push in events:
        m.apply_push(push)
    assert folded == [] and m.state is state and m.activity_total > total
    m.apply_push(ev("slot.state", state="stopping"))
    assert folded == [protocol.EVENT_TYPES["slot.state"]]
    assert m.slot("0").state == "stopping"


def test_a_pushes_decoding_costs_no_call_but_its_own_and_is_made_once():
    """Issue 49, thirteenth round: a source's sample push (a dict) is decoded with no call
    but decode_push's (subscripts, a Struct made in C: a frozen dataclass set each field
    through object.__setattr__), and a decoded push is taken as it is by the model, with no
    call to say so. An event is still decoded into its Struct; a Mapping that is no dict
    reads the same."""
    import sys
    from types import MappingProxyType

    from sgltui.tui.source import Pushed, decode_push

    push = {"push": "sample", "data": make_sample(1.0)}
    calls = []

    def count(frame, event, arg):
        if event in ("call", "c_call"):
            calls.append(frame.f_code.co_name if event == "call" else arg.__qualname__)

    sys.setprofile(count)
    try:
        pushed = decode_push(push)
        again = decode_push(pushed)
    finally:
        sys.setprofile(None)
    assert calls[:1] == ["decode_push"] and calls.count("decode_push") == 2, calls
    assert len(calls) <= 4, calls  # (the two, an isinstance of the decoded one, setprofile)
    assert again is pushed and pushed == Pushed("sample", push["data"])
    assert decode_push(MappingProxyType(push)) == pushed
    assert decode_push({"data": 5}) == Pushed("", 5)
    event = decode_push(ev("slot.state", state="ready"))
    assert isinstance(event.event, protocol.EVENT_TYPES["slot.state"])
    m = TuiModel()
    m.apply_status(make_status())
    calls.clear()
    sys.setprofile(count)
    try:
        m.apply_push(decode_push({"push": "sample", "data": make_sample(2.0)}))
    finally:
        sys.setprofile(None)
    assert calls.count("decode_push") == 1 and "isinstance" not in calls, calls


def test_a_command_in_words_reads_as_before_with_fewer_calls():
    """Issue 49, thirteenth round: command_text asks whether an argument is there before it
    takes it (a pop or get of an absent one was a call each): every mix of arguments reads
    as the rules said before (their code, kept here as the reference)."""
    import itertools

    from sgltui.tui.activity_items import _UNSAID, command_text

    def before(op, args):
        a = {k: v for k, v in args.items() if k not in _UNSAID}
        parts = [op]
        profile = a.pop("profile", None)
        if profile:
            parts.append(f"to {profile}" if op == "swap" else str(profile))
        for where in ("slot", "pool"):
            if a.get(where) not in (None, ""):
                parts.append(f"on {where} {a.pop(where)}")
        extras = []
        drain = a.pop("drain", None)
        if drain and drain != "wait":
            extras.append(f"drain {drain}")
        skipped = a.pop("force", None)
        if isinstance(skipped, list) and skipped:
            checks = ", ".join(map(str, skipped))
            extras.append(f"skipping the {checks} check{'s' if len(skipped) > 1 else ''}")
        if a.pop("rollback", True) is False:
            extras.append("no rollback")
        if a.pop("confirm", False) is True:
            extras.append("confirmed")
        if a.get("timeout") == 30.0:
            a.pop("timeout")
        for k, v in a.items():
            if v in (None, False, "", [], {}):
                continue
            extras.append(k.replace("_", " ") if v is True else f"{k.replace('_', ' ')} {v}")
        return " ".join(parts) + (f" ({', '.join(extras)})" if extras else "")

    values = {
        "profile": (None, "", "p"),
        "slot": (None, "", "0", 1),
        "pool": (None, "all"),
        "drain": (None, "wait", "force"),
        "force": (None, [], ["port"], ["port", "gpu"], "x"),
        "rollback": (None, True, False, 0),
        "confirm": (None, True, False, 1),
        "timeout": (None, 30.0, 5, 30),
        "wait": (None, True),
        "dry_run": (None, True, "", {}),
    }
    keys = list(values)
    for op in ("swap", "stop"):
        for k1, k2, k3 in itertools.combinations(keys, 3):
            for v1, v2, v3 in itertools.product(values[k1], values[k2], values[k3]):
                args = {k: v for k, v in ((k1, v1), (k2, v2), (k3, v3)) if v is not None}
                assert command_text(op, dict(args)) == before(op, dict(args)), (op, args)
    import sys

    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(event) if event.endswith("call") else 0)
    try:
        assert command_text("status", {"n": 3}) == "status (n 3)"
    finally:
        sys.setprofile(None)
    assert len(calls) <= 9, calls  # (18 before: a pop or get of each absent argument)
