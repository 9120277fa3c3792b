"""Issue 39 (the agent with 8 slots): what each slot's telemetry costs every second.

- the capacity card is built once per change of its inputs, not for every slot's engine
  figures each second (building it walks all of /server_info's arguments);
- the /metrics lines a reader keeps are read by a plain reader, which gives exactly what
  prometheus_client gives, and hands anything unusual to prometheus_client;
- a ready server whose engine poll answered lately is not probed for liveness besides.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sgltui.agent.pools.gateway import _GATEWAY_METRICS
from sgltui.agent.telemetry import engine_parse
from sgltui.core.capacity import CapacityBuilder
from tests.telemetry.test_capacity import MTP_HYBRID_TP1


def test_the_card_is_built_again_only_when_an_input_changed(monkeypatch):
    b = CapacityBuilder()
    assert b.card() is None
    for line in MTP_HYBRID_TP1[:4]:
        b.feed_line(line)
    builds = []
    real = b._build
    monkeypatch.setattr(b, "_build", lambda: builds.append(1) or real())
    first = b.card()
    assert first is not None and first["weights_gb"] == 55.60 and first["kv_pool_tokens"] is None
    for _ in range(5):
        assert b.card() == first
    assert builds == [1]
    first["weights_gb"] = 0.0  # a caller's copy: the next card is not changed by it
    assert b.card()["weights_gb"] == 55.60
    b.feed_line("an ordinary line")  # not a start-up line: nothing changed
    b.card()
    assert builds == [1]
    for line in MTP_HYBRID_TP1[4:]:
        b.feed_line(line)
    card = b.card()
    assert card["kv_pool_tokens"] == 245000 and card["max_running_requests"] == 4
    assert len(builds) == 2
    b.feed_server_info({"max_total_num_tokens": 245000, "internal_states": [{}], "x": 1})
    assert "server_info" in b.card()["sources"] and len(builds) == 3


def _registry_text() -> str:
    r = CollectorRegistry()
    sched = ["model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"]
    g = Gauge("sglang:num_running_reqs", "Running.", sched, registry=r)
    g.labels("Qwen/Qwen3.6-27B", "unified", "0", "0", "0").set(3)
    g.labels("Qwen/Qwen3.6-27B", "unified", "1", "0", "0").set(3)
    Gauge("sglang:gen_throughput", "Tput.", sched, registry=r).labels(
        "m,a=b}c", "unified", "0", "0", "0"
    ).set(181.25)
    Gauge("sglang:token_usage", "Usage.", registry=r).set(float("nan"))
    c = Counter("sglang:prompt_tokens", "Prompt.", ["model_name"], registry=r)
    c.labels("m").inc(12345)
    Histogram("sglang:e2e_request_latency_seconds", "Lat.", ["model_name"], registry=r).labels(
        "m"
    ).observe(0.3)
    Gauge("smg_worker_requests_active", "Active.", ["worker"], registry=r).labels(
        "http://127.0.0.1:30001"
    ).set(2)
    Counter("smg_router_retries", "Retries.", registry=r).inc(4)
    return generate_latest(r).decode()


def _reference(text: str, names) -> list:
    kept = engine_parse.only_samples(text, names)
    return [s for f in text_string_to_metric_families(kept) for s in f.samples]


@pytest.mark.parametrize(
    "text",
    [
        _registry_text(),
        'sglang:num_running_reqs{model_name="m",tp_rank="0",} 2\n',  # a trailing comma
        'sglang:num_running_reqs{ model_name = "m" , tp_rank="0"} +Inf\n',
        "sglang:num_running_reqs 7e2\n",
        'sglang:num_running_reqs{model_name="a \\"quoted\\" name"} 1\n',  # escapes: the library
        'sglang:num_running_reqs{model_name="m"} 1 1700000000000\n',  # a timestamp: the library
        "sglang:num_running_reqs{} 5\n",
        "",
    ],
    ids=["registry", "comma", "spaces", "bare", "escapes", "timestamp", "empty-set", "none"],
)
def test_the_plain_reader_reads_what_prometheus_client_reads(text):
    names = engine_parse.ENGINE_METRICS | frozenset(_GATEWAY_METRICS)
    got = engine_parse.metric_samples(text, names)
    want = _reference(text, names)
    assert [(s.name, s.labels, s.timestamp) for s in got] == [
        (s.name, s.labels, s.timestamp) for s in want
    ]
    assert [repr(s.value) for s in got] == [repr(s.value) for s in want]  # nan == nan
    assert got or not text


@pytest.mark.parametrize(
    "text",
    [
        'sglang:num_running_reqs{model_name="m",tp_rank="0"\n',  # torn mid-line
        'sglang:num_running_reqs{model_name="m"} abc\n',
        "sglang:num_running_reqs{model_name=m} 1\n",
    ],
    ids=["torn", "value", "unquoted"],
)
def test_a_malformed_text_is_still_a_value_error(text):
    with pytest.raises(ValueError):
        engine_parse.metric_samples(text, engine_parse.ENGINE_METRICS)


def test_the_plain_reader_reads_the_simple_lines_itself(monkeypatch):
    calls = []
    real = engine_parse.text_string_to_metric_families
    monkeypatch.setattr(
        engine_parse,
        "text_string_to_metric_families",
        lambda text: calls.append(text) or real(text),
    )
    e = engine_parse.engine_from_metrics(_registry_text(), 1.0)
    assert e["num_running_reqs"] == 3 and e["gen_throughput"] == 181.25
    assert calls == []
    engine_parse.metric_samples(
        'sglang:num_running_reqs{model_name="a\\\\b"} 1\n', {"sglang:num_running_reqs"}
    )
    assert len(calls) == 1


def test_an_engine_poll_answer_stands_for_the_liveness_probe(monkeypatch):
    from sgltui.agent.slot import liveness as lv

    probes: list[str] = []
    changes: list[str | None] = []

    async def fake_get(host, port, path, key=None, timeout=2.0):
        probes.append(path)
        return 0, b""  # nothing answers the probe

    async def main() -> None:
        monkeypatch.setattr(lv.http_probe, "get", fake_get)
        monkeypatch.setattr(lv, "stopped_by_signal", lambda pid: False)
        live = lv.Liveness("a", changes.append)
        live.heard(100.0)
        live.tick(100.5, None, "127.0.0.1", 1, None)  # heard 0.5 s ago: no probe
        live.tick(100.0 + lv.HEARD_S - 0.1, None, "127.0.0.1", 1, None)
        await asyncio.sleep(0)
        assert probes == []
        live.tick(100.0 + lv.HEARD_S, None, "127.0.0.1", 1, None)  # nothing heard since: probed
        await asyncio.sleep(0.01)
        assert probes == ["/ready"]
        # Unresponsive (nothing answered for long), then an engine poll answers: alive again.
        live._answered_at = 0.0
        live._next = 0.0
        live.tick(200.0, None, "127.0.0.1", 1, None)
        await asyncio.sleep(0.01)
        assert live.reason is not None and changes[-1] is not None
        live.heard(201.0)
        live.tick(201.5, None, "127.0.0.1", 1, None)
        assert live.reason is None and changes[-1] is None and len(probes) == 2
        live.reset()  # not ready any more: what was heard before does not count
        live.tick(202.0, None, "127.0.0.1", 1, None)
        await asyncio.sleep(0.01)
        assert len(probes) == 3

    asyncio.run(main())


@pytest.mark.slow
def test_a_ready_server_gets_no_readiness_probes_while_its_engine_polls_answer(agent):
    """The real agent and server: the server's access log shows /metrics polls and, once
    they answer, no /ready probes (the old agent asked /ready every 2 s besides)."""
    name = agent.write_profile("t-a")
    slot = agent.call("start", profile=name, wait=True)["slot"]
    time.sleep(2.0)  # the first poll answered
    log = Path(slot["log_path"])
    start = log.stat().st_size
    time.sleep(7.0)
    with log.open("rb") as f:
        f.seek(start)
        new = f.read().decode(errors="replace")
    assert "GET /metrics" in new or "GET /v1/loads" in new, new[-2000:]
    # The old agent probed every 2 s (3 or 4 here); one is allowed for a tick late under load.
    assert new.count("GET /ready") <= 1, new[-2000:]
    assert agent.slot()["unresponsive"] is None


def _only_samples_by_line(text: str, names) -> str:
    """only_samples as it was: a Python loop over every line."""
    wanted = frozenset(names)
    keep = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        end = len(line)
        for sep in ("{", " "):
            at = line.find(sep)
            if 0 <= at < end:
                end = at
        if line[:end] in wanted:
            keep.append(line)
    return "\n".join(keep) + "\n" if keep else ""


@pytest.mark.parametrize(
    "text",
    [
        _registry_text(),
        _registry_text().replace("\n", "\r\n"),
        "sglang:num_running_reqs\nsglang:num_running_reqs_x 1\nsglang:num_running_reqs 2",
        '# sglang:num_running_reqs 1\n\n sglang:num_running_reqs 3\nsglang:gen_throughput{a="b c"} 4\n',
    ],
    ids=["registry", "crlf", "torn-and-longer-names", "comments"],
)
def test_the_lines_kept_are_the_lines_the_loop_kept(text):
    names = engine_parse.ENGINE_METRICS | frozenset(_GATEWAY_METRICS)
    assert engine_parse.only_samples(text, names) == _only_samples_by_line(text, names)


def test_a_slot_refresh_reads_the_shared_table_without_a_thread(monkeypatch):
    import subprocess
    import sys

    from sgltui.agent.slot import procs

    kid = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    try:
        tree = procs.ProcTree.of(kid.pid)
        procs.process_table(0.0)
        reads = []
        real = procs._read_proc
        monkeypatch.setattr(procs, "_read_proc", lambda: reads.append(1) or real())
        assert tree.refresh_shared() == [kid.pid]
        assert reads == []
        assert tree.refresh_shared(max_age=0.0) is None  # too old: the caller reads /proc
        assert reads == []
        other = procs.ProcTree(pid=kid.pid, pgid=kid.pid, create_time=1.0)  # not that process
        assert other.refresh_shared() is None
    finally:
        kid.kill()
        kid.wait()
