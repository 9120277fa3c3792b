"""Issue 39 (the agent with 8 slots): what each slot's telemetry costs every second.

- the capacity card is built once per change of its inputs, not for every slot's engine
  figures each second (building it walks all of /server_info's arguments);
- the /metrics lines a reader keeps are read by a plain reader, which gives exactly what
  prometheus_client gives, and hands anything unusual to prometheus_client.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sgltui.agent.gateway import _GATEWAY_METRICS
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
