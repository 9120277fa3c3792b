"""Warm-first order (jobs/warm_first.py): on a server whose prefix cache starts empty, one request
per shared prefix first, then the held-back items in file order; every item exactly once; nothing
reordered where nothing is shared; the trial takes the pass's end as the cache's warm-up."""

from __future__ import annotations

import asyncio
import json
import socket

from aiohttp import web

from sgltui.jobs import batchfile, choose, warm_first
from sgltui.jobs.runner import Runner
from tests.jobs.batch_input import read_output, write_input
from tests.jobs.shared_input import SYSTEM, write_shared


def _order(path, **kw) -> warm_first.Order:
    p = warm_first.plan(path)
    assert p is not None
    return warm_first.Order(batchfile.items(path), p, **kw)


def test_a_cold_start_sends_one_per_document_then_the_rest_in_file_order(tmp_path):
    inp = tmp_path / "in.jsonl"
    docs = write_shared(inp, 25, 20, system=SYSTEM)
    o = _order(inp)
    assert o.plan.distinct == 25 and o.plan.cap == 50
    assert o.cold("L1") == 25
    ids = [int(i.custom_id[1:]) for i in o]
    assert sorted(ids) == list(range(500))  # every item once
    first, rest = ids[:25], ids[25:]
    assert sorted(docs[i] for i in first) == list(range(25))  # one per document...
    assert first == sorted(first)  # ... each its document's first line
    assert first == [docs.index(c) for c in sorted(set(docs), key=docs.index)]
    assert rest == sorted(rest)  # the held-back ones in file order
    rep = o.report()
    assert rep["launch"] == "L1" and rep["primed"] == 25 and rep["left"] == 25


def test_the_pass_is_bounded_by_the_lookahead_and_a_second_cold_start_primes_again(tmp_path):
    inp = tmp_path / "in.jsonl"
    docs = write_shared(inp, 25, 20)
    o = _order(inp, lookahead=40)
    n = o.cold()
    seen = docs[:40]
    assert n == len(set(seen))  # only what the 40 read ahead hold
    got = [next(o) for _ in range(n + 5)]
    for i in got[:n]:
        o.written(i.custom_id)
    assert o.report()["left"] == 0  # the pass ended
    given = {int(i.custom_id[1:]) for i in got}
    held = [i for i in range(40) if i not in given]
    held += list(range(40, 40 + 40 - len(held)))  # read on to the lookahead again
    assert o.cold("L2") == len({docs[i] for i in held})  # one per document it holds
    rest = [int(i.custom_id[1:]) for i in o]
    assert sorted([int(i.custom_id[1:]) for i in got] + rest) == list(range(500))


def test_an_unfinished_pass_goes_back_to_file_order_at_the_next_cold_start(tmp_path):
    inp = tmp_path / "in.jsonl"
    write_shared(inp, 25, 20)
    o = _order(inp)
    o.cold()
    taken = [next(o) for _ in range(3)]  # a swap after 3 of the pass went out
    o.cold("L2")
    ids = [i.custom_id for i in taken] + [i.custom_id for i in o]
    assert sorted(ids) == sorted(f"r{i}" for i in range(500)) and len(set(ids)) == 500


def test_keys_too_fine_are_capped_at_twice_the_measured_prefixes(tmp_path):
    inp = tmp_path / "in.jsonl"
    write_shared(inp, 25, 20)
    p = warm_first.plan(inp)
    assert p is not None
    o = warm_first.Order(batchfile.items(inp), warm_first.Plan(key_chars=10**6,
                         distinct=p.distinct, cap=p.cap))  # fmt: skip
    assert o.cold() == 50  # every prompt its own key: the cap, not the lookahead


def test_nothing_shared_no_plan_and_the_runner_sends_in_file_order(tmp_path):
    inp = tmp_path / "in.jsonl"
    write_input(inp, 300)
    assert warm_first.plan(inp) is None
    r = Runner(inp, tmp_path / "out.jsonl", 2, [].append)
    checked = r.prepare()
    r.release()
    assert r.warm is None and checked["warm_first"] is None
    assert r.progress()["warm_first"] is None


async def _serve(log: list[str]) -> tuple[web.AppRunner, int]:
    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        log.append(body.get("prompt") or body["messages"][0]["content"])
        await asyncio.sleep(0.002)
        return web.json_response(
            {"id": "x", "choices": [{"index": 0, "text": "ok", "finish_reason": "length"}],
             "usage": {"prompt_tokens": 4, "completion_tokens": 4}}
        )  # fmt: skip

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    return runner, sock.getsockname()[1]


async def test_the_runner_primes_at_its_start_and_again_for_a_new_launch(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    docs = write_shared(inp, 20, 15)
    log: list[str] = []
    server, port = await _serve(log)
    events: list[dict] = []
    r = Runner(inp, out, 1, events.append)
    r.prepare()
    r.set_target(f"http://127.0.0.1:{port}")
    task = asyncio.get_running_loop().create_task(r.run())
    try:
        for _ in range(500):
            await asyncio.sleep(0.01)
            if len(log) >= 40:
                break
        r.set_launch("L1")  # the job's start server: its pass is that one's, no new pass
        assert r.warm is not None and r.warm.passes == 1 and r.warm.launch == "L1"
        r.set_launch("L2")  # a swap to a new server: a new pass
        assert r.warm.passes == 2 and r.warm.launch == "L2"
        await asyncio.wait_for(task, 20)
    finally:
        r.stop()
        await server.cleanup()
    key = r.warm.plan.key_chars
    assert len({p[:key] for p in log[:20]}) == 20  # the first 20 sent: every document once
    lines = read_output(out)
    assert sorted(int(x["custom_id"][1:]) for x in lines) == list(range(len(docs)))
    assert r.progress()["warm_first"]["left"] == 0 and r.warm.primed > 0


def _measuring(warmup: int = 400) -> dict:
    c = choose._candidate("hic")
    c["warmup"] = warmup
    choose.begin(c, 1000, 0, 0.0, 4)
    return c


def test_the_trial_takes_the_end_of_the_pass_as_the_cache_warm_up():
    c = _measuring()
    assert c["cold_until"] == 1400  # advise's estimate until the runner says otherwise
    choose.warm_first(c, {"launch": "old", "left": 0, "primed": 9}, "L2", 1001)
    assert c["cold_until"] == 1400  # another server's pass: not this one's
    choose.warm_first(c, {"launch": "L2", "left": 150, "primed": 200}, "L2", 1050)
    assert c["cold_until"] == 1050 + 150 + 4  # the pass's rest and a wave
    choose.warm_first(c, {"launch": "L2", "left": 0, "primed": 200}, "L2", 1210)
    assert c["cold_until"] == 1204 and c["warm_first"] == {"primed": 200, "at": 1210}
    choose.warm_first(c, {"launch": "L2", "left": 3, "primed": 7}, "L2", 1300)
    assert c["cold_until"] == 1204  # taken once per window


def test_no_report_leaves_advises_warm_up():
    c = _measuring()
    choose.warm_first(c, None, "L2", 1100)
    assert c["cold_until"] == 1400 and c["warm_first"] is None


def test_the_plan_is_said_when_the_input_is_checked(tmp_path):
    inp = tmp_path / "in.jsonl"
    write_shared(inp, 12, 10)
    r = Runner(inp, tmp_path / "out.jsonl", 2, [].append)
    checked = r.prepare()
    r.release()
    assert checked["warm_first"]["distinct"] == 12
    assert json.dumps(checked)  # a line to the agent


def test_a_cache_that_holds_part_of_the_prefixes_gets_no_pass(tmp_path):
    inp = tmp_path / "in.jsonl"
    write_shared(inp, 25, 20)
    o = _order(inp)
    assert o.cold("L1", most=24) == 0  # warm after fewer requests than there are documents
    ids = [int(i.custom_id[1:]) for i in o]
    assert ids == list(range(500))  # no pass: file order
    assert _order(inp).cold("L1", most=30) == 25  # one that holds them all: the whole pass
    # the job's start pass, taken back once the agent says the server and its warm-up
    o2 = _order(inp)
    assert o2.cold() == 25
    taken = [next(o2) for _ in range(4)]
    o2.trim(20)
    assert o2.primed == 0 and o2.report()["left"] == 0  # the 4 given out: ordinary sends
    rest = [int(i.custom_id[1:]) for i in o2]
    assert sorted(rest + [int(i.custom_id[1:]) for i in taken]) == list(range(500))
    assert rest == sorted(rest)  # what the pass gave back is in its place


def test_the_warm_up_to_prime_is_the_candidates_where_advise_said_one():
    trial = {"candidates": [{"name": "a", "warmup": 122}, {"name": "b", "warmup": 0}]}
    assert choose.prime_most(trial, "a") == 122
    assert choose.prime_most(trial, "b") is None and choose.prime_most(trial, "c") is None
    assert choose.prime_most(None, "a") is None
