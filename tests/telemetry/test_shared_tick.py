"""Issue 39: the agent's samplers share their work across slots and skip what did not change.

- one pass over /proc serves every slot's process tree within SHARED_AGE_S (each slot read
  /proc on its own every second, and psutil's children() reads every process of the host);
- an idle server's /metrics is polled every IDLE_POLL_S, not every tick, until a batch line
  in its log says requests run or wait (a health check's batch line is no work);
- the /metrics lines no reader uses are dropped before the Prometheus parser.
"""

from __future__ import annotations

import subprocess
import sys

from sgltui.agent.slot import procs
from sgltui.agent.telemetry import engine_parse
from sgltui.agent.telemetry.engine import SlotWatch
from sgltui.agent.telemetry.telemetry import IDLE_POLL_S


def test_process_trees_of_several_slots_share_one_pass_over_proc(monkeypatch):
    kids = [
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
        )
        for _ in range(3)
    ]
    try:
        trees = [procs.ProcTree.of(k.pid) for k in kids]
        reads = []
        real = procs._read_proc
        monkeypatch.setattr(procs, "_read_proc", lambda: reads.append(1) or real())
        procs.process_table(0.0)  # a fresh table: the trees below must share it
        reads.clear()
        for tree in trees:
            assert tree.refresh() == [tree.pid]
            tree.scan()
            assert tree.pids == {tree.pid}
        assert reads == []  # all three trees (and their scans) read the shared table
        # A stop reads /proc afresh: a process that just ended is not alive any more.
        kids[0].kill()
        kids[0].wait()
        assert trees[0].alive() == []
        assert reads == [1]
    finally:
        for k in kids:
            k.kill()
            k.wait()


def test_a_new_server_is_never_looked_up_in_a_table_from_before_it():
    procs.process_table(0.0)
    kid = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    try:
        tree = procs.ProcTree.of(kid.pid)
        assert tree.refresh() == [kid.pid]
    finally:
        kid.kill()
        kid.wait()


def _watch(running: int, queued: int, polled_at: float) -> SlotWatch:
    w = SlotWatch("a", 1, "http://127.0.0.1:1", None)
    w._ok({"ts": 1.0, "num_running_reqs": running, "num_queue_reqs": queued})
    w.polled_at = polled_at
    return w


def test_an_idle_server_is_polled_less_often_until_a_batch_line_says_work_came():
    w = SlotWatch("a", 1, "http://127.0.0.1:1", None)
    assert w.poll_due(100.0, IDLE_POLL_S)  # never polled
    idle = _watch(0, 0, polled_at=100.0)
    assert not idle.poll_due(100.0 + IDLE_POLL_S / 2, IDLE_POLL_S)
    assert idle.poll_due(100.0 + IDLE_POLL_S, IDLE_POLL_S)  # still polled, every IDLE_POLL_S
    # A health check's batch line (the gateway's, every second) is no work...
    health = (
        "[2026-12-05 21:35:13] Prefill batch, #new-seq: 1, #new-token: 1, #cached-token: 0, "
        "full token usage: 0.00, #running-req: 0, #queue-req: 0"
    )
    assert idle.log.feed(health, 100.1)
    idle.log_seq += 1
    assert not idle.poll_due(100.0 + 0.1, IDLE_POLL_S)
    # ... a batch line with requests running is.
    decode = (
        "[2026-12-05 21:35:14] Decode batch, #running-req: 4, #token: 8000, token usage: 0.30, "
        "gen throughput (token/s): 181.20, #queue-req: 2"
    )
    assert idle.log.feed(decode, 100.2)
    idle.log_seq += 1
    assert idle.poll_due(100.0 + 0.2, IDLE_POLL_S)
    busy = _watch(2, 0, polled_at=100.0)
    assert busy.poll_due(100.1, IDLE_POLL_S)
    failing = _watch(0, 0, polled_at=100.0)
    failing.error = "server did not answer within the poll timeout"
    assert failing.poll_due(100.1, IDLE_POLL_S)


def test_news_only_once_per_poll_or_batch_line():
    w = _watch(0, 0, polled_at=100.0)
    assert w.news() and not w.news()
    w.log_seq += 1
    assert w.news() and not w.news()


def test_metrics_lines_no_reader_uses_are_dropped_before_parsing():
    text = (
        "# HELP sglang:num_running_reqs The number of running requests.\n"
        "# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="m",tp_rank="0"} 3.0\n'
        'sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="m"} 7.0\n'
        'sglang:gen_throughput{model_name="m"} 41.5\n'
    )
    kept = engine_parse.only_samples(text, engine_parse.ENGINE_METRICS)
    assert "bucket" not in kept and "# " not in kept
    e = engine_parse.engine_from_metrics(text, 1.0)
    assert e["num_running_reqs"] == 3 and e["gen_throughput"] == 41.5
