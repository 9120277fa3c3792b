"""Every telemetry series against the real simulator (a process started by tests/fixtures/sim.py).

The expected figures are never hard-coded: each is cross-checked against another of the
simulator's own outputs (its GPU publication, /v1/loads, /metrics, its process tree), so the test
fails if telemetry reads, attributes or aggregates anything wrongly.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx
import msgspec
import psutil
import pytest

from sgltui import protocol
from sgltui.agent.gpu.sim import read_publications
from sgltui.agent.telemetry import Telemetry
from sgltui.agent.telemetry.engine_parse import parse_metrics_text
from sgltui.core.loglines import parse_batch_line
from tests.sim.helpers import qwen36

pytestmark = pytest.mark.slow  # samplers against running simulators: seconds each

MTP_HICACHE = (
    *qwen36("rtx-pro-6000-96gb"),
    "--speculative-algorithm",
    "NEXTN",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
    "--max-running-requests",
    "4",
    "--enable-hierarchical-cache",
    "--hicache-ratio",
    "2.0",
)
FAST = dict(
    gpu_interval=0.1, host_interval=0.1, record_interval=0.2, engine_interval=0.1, gpu_source="sim"
)


class Tail:
    """Feeds the simulator's output to telemetry the way the agent's log tail does."""

    def __init__(self, sim, tel: Telemetry, slot: str = "0") -> None:
        self.sim, self.tel, self.slot, self.pos = sim, tel, slot, 0

    def pump(self) -> None:
        lines = self.sim.lines()
        for line in lines[self.pos :]:
            self.tel.on_log_line(self.slot, line)
        self.pos = len(lines)


async def load(url: str, n: int = 6, tokens: int = 400) -> None:
    async with httpx.AsyncClient(timeout=60) as c:

        async def one(i: int) -> None:
            r = await c.post(
                url + "/generate",
                json={
                    "text": f"request {i} " * 20,
                    "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
                },
            )
            assert r.status_code == 200, r.text

        await asyncio.gather(*(one(i) for i in range(n)))


LOAD_ROUNDS_S = 60.0  # how long the load is sent again while the samples miss what it shows


async def run_with_load(
    sim,
    tel: Telemetry,
    seconds_after: float = 0.5,
    until: Callable[[], bool] | None = None,
    **load_kw,
) -> list[dict]:
    """Telemetry sampling the simulator under a round of load; `until`: what the samples must
    have caught (a full batch, a queue), the load sent again until they have. A round's full
    batch lasts about a second: on a loaded machine the 0.1 s sampler caught two samples of
    it, both before it (CI saw max running 0 of 4), so the wait is on what was seen."""
    samples: list[dict] = []
    tel.on_sample = samples.append
    tail = Tail(sim, tel)
    tail.pump()
    tel.attach("0", sim.pid, sim.url, None)
    await tel.start()
    deadline = time.monotonic() + LOAD_ROUNDS_S
    try:
        while True:
            job = asyncio.create_task(load(sim.url, **load_kw))
            while not job.done():
                tail.pump()
                await asyncio.sleep(0.05)
            await job
            if until is None or until() or time.monotonic() > deadline:
                break
        for _ in range(int(seconds_after / 0.05)):
            tail.pump()
            await asyncio.sleep(0.05)
    finally:
        await tel.stop()
    return samples


def values(tel: Telemetry, name: str) -> list[float]:
    return [v for _, v in tel.series(name)["series"].get(name, []) if v is not None]


def saw_a_full_batch(tel: Telemetry, full: int) -> bool:
    """The samples caught the load at its height: every slot running, more queued, tokens made,
    the GPU busy (what the tests then check against the server's own figures)."""
    return all(
        (
            max(values(tel, "engine.0.num_running_reqs"), default=0) >= full,
            max(values(tel, "engine.0.num_queue_reqs"), default=0) >= 1,
            max(values(tel, "engine.0.gen_throughput"), default=0) > 0,
            max(values(tel, "gpu.0.utilization_pct"), default=0) > 0,
        )
    )


async def test_mtp_hicache_with_metrics_every_series(sim_server):
    sim = sim_server(*MTP_HICACHE, "--enable-metrics", time_scale="0.05")
    tel = Telemetry(lambda s: None, **FAST)
    full = httpx.get(sim.url + "/v1/loads").json()["loads"][0]["max_running_requests"]
    samples = await run_with_load(sim, tel, until=lambda: saw_a_full_batch(tel, full))

    pub = next(p for p in read_publications() if p["pid"] == sim.pid)
    loads = httpx.get(sim.url + "/v1/loads").json()["loads"][0]
    metrics = parse_metrics_text(httpx.get(sim.url + "/metrics").text)
    snap = tel.snapshot()

    # GPU: the simulator's publication, labelled simulated, attributed to the slot.
    assert snap["gpu_source"]["kind"] == "sim"
    g = snap["gpus"][0]
    assert g["simulated"] is True and "simulated" in g["name"]
    assert g["total_bytes"] == pub["gpus"][0]["total_bytes"]
    assert g["server_bytes"]["0"] == g["used_bytes"] > 0
    assert g["breakdown_bytes"]["weights"] == pub["gpus"][0]["breakdown_bytes"]["weights"]
    for key in (
        "used_bytes",
        "utilization_pct",
        "power_w",
        "temperature_c",
        "pcie_rx_bytes_s",
        "pcie_tx_bytes_s",
        "server_bytes.0",
    ):
        assert values(tel, f"gpu.0.{key}"), key
    assert max(values(tel, "gpu.0.utilization_pct")) > 0  # load shows as utilization

    # Host: RAM, CPU, the server's tree (RSS of every process of the simulator) and its pinned pool.
    host = snap["host"]
    assert host["ram_total_bytes"] == psutil.virtual_memory().total
    tree_rss = sum(psutil.Process(p).memory_info().rss for p in pub["pids"] if psutil.pid_exists(p))
    assert 0.5 * tree_rss < host["server_rss_bytes"]["0"] < 2 * tree_rss
    assert host["server_pinned_bytes"]["0"] == pub["host_pinned_bytes"] > 0
    for key in (
        "ram_used_bytes",
        "ram_available_bytes",
        "swap_used_bytes",
        "cpu_pct",
        "server_rss_bytes.0",
        "server_cpu_pct.0",
        "server_pinned_bytes.0",
    ):
        assert values(tel, f"host.{key}"), key

    # Engine from /metrics: saw the load, and agrees with the server's own constants.
    e = snap["engine"]["0"]
    assert e["source"] == "metrics" and e["error"] is None
    assert e["max_total_num_tokens"] == loads["max_total_num_tokens"]
    assert e["max_running_requests"] == loads["max_running_requests"]  # from the capacity card
    running = values(tel, "engine.0.num_running_reqs")
    assert max(running) == loads["max_running_requests"]  # 6 requests against 4 slots: full
    assert max(values(tel, "engine.0.num_queue_reqs")) >= 1  # and the other two waited
    assert max(values(tel, "engine.0.gen_throughput")) > 0
    assert max(values(tel, "engine.0.token_usage")) > 0
    assert values(tel, "engine.0.cache_hit_rate")
    accept = values(tel, "engine.0.accept_length")
    assert accept and all(a >= 1.0 for a in accept)

    # Capacity card: start-up lines + /server_info, cross-checked against /v1/loads and /metrics.
    card = tel.capacity("0")
    assert card["max_running_requests"] == loads["max_running_requests"]
    assert card["requested_max_running_requests"] == 4
    assert card["kv_pool_tokens"] == loads["max_total_num_tokens"]
    assert card["weights_gb"] == sum(metrics["sglang:weight_memory_usage_gb"]["0"])
    assert card["context_length"] == int(sum(metrics["sglang:context_len"]["0"]))
    slots = (
        metrics["sglang:mamba_available_tokens"]["0"][0]
        + metrics["sglang:mamba_used_tokens"]["0"][0]
    )
    assert card["mamba_state_slots"] == slots
    assert abs(card["hicache_host_gb"] * 1e9 - pub["host_pinned_bytes"]) < 0.05e9
    assert card["draft_weights_gb"] and card["draft_weights_gb"] > 0
    assert card["cuda_graph_bs"] and max(card["cuda_graph_bs"]) <= card["max_running_requests"]
    assert "server_info" in card["sources"] and "log" in card["sources"]
    # Slot accounting from core/mamba_slots.py, the same rule the simulator sized with.
    assert (card["mamba_strategy"], card["mamba_slots_per_request"]) == ("extra_buffer", 5)
    assert card["mamba_slots_held_per_request"] == 3
    assert card["bound"] == {"by": "flag", "text": "the flag: max-running-requests = 4"}

    # Recorded samples: the SAMPLE shape, at the record rate, JSON-clean.
    assert samples and all(s["v"] == 1 for s in samples)
    assert set(samples[-1]) >= {"v", "ts", "gpus", "host", "engine", "gpu_source"}
    json.dumps(samples[-1])


async def test_plain_server_without_metrics_uses_v1_loads(sim_server):
    sim = sim_server(
        *qwen36("h200-141gb"),
        "--max-running-requests",
        "3",
        time_scale="0.05",
    )
    assert httpx.get(sim.url + "/metrics").status_code == 404
    tel = Telemetry(lambda s: None, **FAST)
    await run_with_load(sim, tel, n=5, until=lambda: saw_a_full_batch(tel, 3))
    e = tel.snapshot()["engine"]["0"]
    loads = httpx.get(sim.url + "/v1/loads").json()["loads"][0]
    assert e["source"] == "loads" and e["error"] is None
    assert e["max_running_requests"] == loads["max_running_requests"] == 3
    assert max(values(tel, "engine.0.num_running_reqs")) == 3
    assert max(values(tel, "engine.0.gen_throughput")) > 0
    assert (
        e["accept_length"] is None and values(tel, "engine.0.accept_length") == []
    )  # no speculation
    assert tel.snapshot()["gpus"][0]["name"].endswith("(simulated)")


async def test_log_lines_alone_when_http_is_unreachable(sim_server, free_port):
    sim = sim_server(*MTP_HICACHE, time_scale="0.05")
    tel = Telemetry(lambda s: None, **FAST)
    tail = Tail(sim, tel)
    tel.attach("0", sim.pid, f"http://127.0.0.1:{free_port}", None)  # nothing listens there
    await tel.start()
    try:
        job = asyncio.create_task(load(sim.url))
        while not job.done():
            tail.pump()
            await asyncio.sleep(0.05)
        await job
        tail.pump()
        await asyncio.sleep(0.3)
    finally:
        await tel.stop()
    e = tel.snapshot()["engine"]["0"]
    assert e["source"] == "log" and "connection refused" in e["error"]
    decodes = [
        b for b in map(parse_batch_line, sim.lines()) if b is not None and b.kind == "decode"
    ]
    assert decodes, "the simulator printed no Decode batch line"
    assert e["accept_length"] == decodes[-1].accept_length
    assert e["gen_throughput"] == decodes[-1].gen_throughput
    assert max(values(tel, "engine.0.num_running_reqs")) == max(d.num_running_reqs for d in decodes)
    assert tel.capacity("0")["max_running_requests"] == 4  # the summary line alone gives the card


async def test_tensor_parallel_gpus_all_attributed(sim_server):
    sim = sim_server(
        *qwen36("h100-80gb"),
        "--tp-size",
        "2",
        time_scale="0.002",
    )
    tel = Telemetry(lambda s: None, **FAST)
    tail = Tail(sim, tel)
    tail.pump()
    tel.attach("0", sim.pid, sim.url, None, tp_size=2)
    await tel.start()
    try:
        for _ in range(10):
            tail.pump()
            await asyncio.sleep(0.05)
    finally:
        await tel.stop()
    snap = tel.snapshot()
    gpus = snap["gpus"]
    assert [g["index"] for g in gpus] == [0, 1]
    # STATUS sends it as protocol.TelemetryView: every GPU figure declared with its type
    typed = msgspec.convert(snap, protocol.TelemetryView)
    extra = {k for g in gpus for k in g} - set(protocol.GpuView.__struct_fields__)
    assert not extra, extra
    for g, back in zip(json.loads(json.dumps(gpus)), protocol.to_builtins(typed.gpus)):
        assert {k: back[k] for k in g} == g  # nothing lost or changed
    if snap["host"]:
        assert set(snap["host"]) <= set(protocol.HostView.__struct_fields__)
    assert all(g["server_bytes"].get("0", 0) > 0 for g in gpus)
    card = tel.capacity("0")
    assert card["tp_size"] == 2 and any("per GPU" in n for n in card["notes"])
    rank0_kv = [line for line in sim.lines() if "KV Cache is allocated" in line and "TP0" in line]
    assert rank0_kv and str(card["kv_pool_tokens"]) in rank0_kv[0]
    # STATUS sends it as protocol.CapacityCard: every field of the card is declared, with its
    # type (a strict read, nothing dropped)
    typed = msgspec.convert(card, protocol.CapacityCard)
    assert set(card) <= set(protocol.CapacityCard.__struct_fields__)
    assert protocol.to_builtins(typed) == json.loads(json.dumps(card))


async def test_capacity_callback_and_detach_keeps_the_card(sim_server):
    sim = sim_server(
        "--model-path", "Qwen/Qwen3.6-27B", "--max-running-requests", "7", time_scale="0.002"
    )
    cards: list[tuple[str, dict]] = []
    tel = Telemetry(
        lambda s: None, on_capacity=lambda slot, card: cards.append((slot, card)), **FAST
    )
    tail = Tail(sim, tel)
    tel.attach("0", sim.pid, sim.url, None)
    tail.pump()
    await tel.start()
    try:
        for _ in range(20):
            if len(cards) >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        await tel.stop()
    assert cards and cards[0][0] == "0"
    summary = next(line for line in sim.lines() if "max_total_num_tokens=" in line)
    effective = int(summary.split("max_running_requests=")[1].split(",")[0])
    first = cards[0][1]
    assert first["sources"] == ["log"]
    assert (
        first["max_running_requests"] == effective and first["requested_max_running_requests"] == 7
    )
    if effective < 7:  # the hybrid model's state pool caps it: the card must say so
        assert any("below the requested 7" in n for n in first["notes"])
    assert "server_info" in cards[-1][1]["sources"]  # a second call once /server_info was read
    tel.detach("0")
    tel.on_log_line(
        "0",
        "Decode batch, #running-req: 99, #token: 1, token usage: 0.50, cuda graph: True, "
        "gen throughput (token/s): 1.0, #queue-req: 0",
    )  # late output of a stopped server
    assert tel.snapshot()["engine"] == {}
    assert tel.capacity("0")["max_running_requests"] == effective
