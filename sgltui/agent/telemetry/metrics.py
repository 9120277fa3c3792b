"""Opt-in Prometheus metrics of the agent (agent.toml `[metrics] port`), served on loopback
with prometheus-client.

Gauges are read at scrape time from STATUS (nothing is sampled when nobody scrapes); counters of
what happened (swaps and their durations, launches, crashes) are folded from the agent's own
event stream. prometheus-client serves from its own thread, so a scrape asks the agent's loop
for STATUS (run_coroutine_threadsafe) instead of reading the agent's objects across threads.
Every series is labelled host (this host's short name), slot and pool (the pool holding the
slot, "" for none).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sgltui import protocol
from sgltui.agent.pushes import Pushes, PushQueue
from sgltui.core.tasks import spawn

log = logging.getLogger("sgltui.agent.metrics")

SLOT_STATES = ("stopped", "launching", "ready", "draining", "stopping", "failed", "crashed")
SCRAPE_TIMEOUT_S = 5.0
LABELS = ("host", "slot", "pool")


def short_host() -> str:
    return socket.gethostname().split(".")[0]


def pools_of(status: dict[str, Any]) -> dict[str, str]:
    """slot -> the pool that holds it (the first, when several do)."""
    out: dict[str, str] = {}
    for p in status.get("pools") or []:
        for s in p.get("slots") or []:
            out.setdefault(s, p.get("name", ""))
    return out


def port_problem(host: str, port: int) -> str | None:
    """Why the metrics cannot listen on host:port (taken, not this host's), else None: checked
    before the agent detaches, so that `agent start` says it instead of 'running'."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the HTTP server binds
        try:
            s.bind((host, port))
        except OSError as exc:
            return (
                f"[metrics] port {port} on {host}: cannot listen ({exc.strerror or exc}); "
                "set another [metrics] port in agent.toml (or SGLTUI_METRICS_PORT=off)"
            )
    return None


class StatusCollector(Collector):
    """The gauges of one STATUS, read when Prometheus scrapes."""

    def __init__(self, read_status: Callable[[], dict[str, Any]], host: str) -> None:
        self.read_status = read_status
        self.host = host

    def collect(self) -> Iterator[Any]:
        try:
            st = self.read_status()
        except (TimeoutError, concurrent.futures.TimeoutError):  # the loop did not answer in time
            log.warning("metrics scrape: the agent did not answer in time; no gauges this time")
            return
        except Exception:
            log.exception("metrics scrape: no status")
            return
        pools = pools_of(st)
        h = self.host
        state = GaugeMetricFamily(
            "sgltui_slot_state", "1 for the slot's current state", labels=[*LABELS, "state"]
        )
        profile = GaugeMetricFamily(
            "sgltui_slot_profile", "1 for the profile the slot runs", labels=[*LABELS, "profile"]
        )
        ready = GaugeMetricFamily("sgltui_slot_ready", "1 when the slot serves", labels=LABELS)
        progress = GaugeMetricFamily(
            "sgltui_slot_launch_progress", "start-up progress 0..1 while launching", labels=LABELS
        )
        gpu_mem = GaugeMetricFamily(
            "sgltui_slot_gpu_memory_bytes", "GPU memory the slot's server holds", labels=LABELS
        )
        tok = GaugeMetricFamily(
            "sgltui_slot_gen_throughput", "the server's output tok/s", labels=LABELS
        )
        per_slot_mem: dict[str, float] = {}
        tel = st.get("telemetry") or {}
        for g in tel.get("gpus") or []:
            for slot, b in (g.get("server_bytes") or {}).items():
                if isinstance(b, (int, float)):
                    per_slot_mem[slot] = per_slot_mem.get(slot, 0.0) + float(b)
        engine = tel.get("engine") or {}
        for s in st.get("slots") or []:
            sid = str(s.get("id"))
            lab = [h, sid, pools.get(sid, "")]
            cur = str(s.get("state") or "stopped")
            for name in SLOT_STATES:
                state.add_metric([*lab, name], 1.0 if cur == name else 0.0)
            if s.get("profile"):
                profile.add_metric([*lab, str(s["profile"])], 1.0)
            ready.add_metric(lab, 1.0 if cur == "ready" else 0.0)
            if s.get("progress") is not None:
                progress.add_metric(lab, float(s["progress"]))
            if sid in per_slot_mem:
                gpu_mem.add_metric(lab, per_slot_mem[sid])
            e = engine.get(sid) or {}
            if isinstance(e.get("gen_throughput"), (int, float)):
                tok.add_metric(lab, float(e["gen_throughput"]))
        yield from (state, profile, ready, progress, gpu_mem, tok)
        jlabels = [*LABELS, "job"]
        answered = GaugeMetricFamily(
            "sgltui_job_completions", "requests a batch job has answered", labels=jlabels
        )
        failed = GaugeMetricFamily("sgltui_job_failed", "requests that failed", labels=jlabels)
        total = GaugeMetricFamily("sgltui_job_requests", "requests in the job", labels=jlabels)
        frac = GaugeMetricFamily("sgltui_job_progress", "answered / total, 0..1", labels=jlabels)
        eta = GaugeMetricFamily("sgltui_job_eta_seconds", "estimated time left", labels=jlabels)
        jtok = GaugeMetricFamily("sgltui_job_tok_s", "the job's output tok/s", labels=jlabels)
        for j in st.get("jobs") or []:
            sid = str(j.get("slot"))
            lab = [h, sid, pools.get(sid, ""), str(j.get("id"))]
            answered.add_metric(lab, float(j.get("answered") or 0))
            failed.add_metric(lab, float(j.get("failed") or 0))
            if j.get("total"):
                total.add_metric(lab, float(j["total"]))
                frac.add_metric(lab, float(j.get("answered") or 0) / float(j["total"]))
            if j.get("eta_s") is not None:
                eta.add_metric(lab, float(j["eta_s"]))
            jtok.add_metric(lab, float(j.get("tok_s") or 0.0))
        yield from (answered, failed, total, frac, eta, jtok)


class AgentMetrics:
    """The registry, the event-fed counters and the HTTP server."""

    def __init__(self, status: Callable[[], dict[str, Any]], host: str | None = None) -> None:
        self.host = host or short_host()
        self.registry = CollectorRegistry(auto_describe=True)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._status = status
        self.registry.register(StatusCollector(self._status_from_thread, self.host))
        self.swaps = Counter(
            "sgltui_swaps",
            "swaps that finished, by outcome (ok, rolled_back, failed)",
            [*LABELS, "outcome"],
            registry=self.registry,
        )
        self.swap_seconds = Histogram(
            "sgltui_swap_duration_seconds",
            "a swap's duration, keystroke to the new profile ready (or its rollback)",
            LABELS,
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200),
            registry=self.registry,
        )
        self.entered = Counter(
            "sgltui_slot_entered",
            "times a slot entered ready, failed or crashed (launch outcomes)",
            [*LABELS, "state"],
            registry=self.registry,
        )
        self._pools: dict[str, str] = {}
        self._server: Any = None

    def _status_from_thread(self) -> dict[str, Any]:
        if self.loop is None:
            return {}  # the registry's first look, at registration: nothing to read yet

        async def read() -> dict[str, Any]:
            st = self._status()
            self._pools = pools_of(st)
            return st

        return asyncio.run_coroutine_threadsafe(read(), self.loop).result(SCRAPE_TIMEOUT_S)

    def on_event(self, ev: dict[str, Any]) -> None:
        """One event of the agent's stream (the `event` push's data)."""
        kind = ev.get("type")
        slot = ev.get("slot")
        if not isinstance(slot, str):
            return
        lab = (self.host, slot, self._pools.get(slot, ""))
        if kind == "swap.done":
            outcome = "ok" if ev.get("ok") else "rolled_back" if ev.get("rolled_back") else "failed"
            self.swaps.labels(*lab, outcome).inc()
            timings = ev.get("timings_s") or {}
            total = timings.get("total")
            if not isinstance(total, (int, float)):
                parts = [v for v in timings.values() if isinstance(v, (int, float))]
                total = sum(parts) if parts else None
            if total is not None:
                self.swap_seconds.labels(*lab).observe(float(total))
        elif kind == "slot.state" and ev.get("state") in ("ready", "failed", "crashed"):
            self.entered.labels(*lab, ev["state"]).inc()

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        self.loop = asyncio.get_running_loop()
        self._server, _thread = start_http_server(port, addr=host, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class MetricsService:
    """AgentMetrics hooked to a running agent: its STATUS and its event stream."""

    def __init__(
        self,
        status: Callable[[], protocol.StatusReply],
        pushes: Pushes,
        port: int,
        host: str,
    ) -> None:
        self.pushes, self.port, self.host = pushes, port, host
        # the collector reads STATUS as the wire carries it (JSON values)
        self.metrics = AgentMetrics(lambda: protocol.to_builtins(status()))
        self.queue: PushQueue | None = None
        self.task: asyncio.Task | None = None
        self.error: str | None = None

    def start(self) -> None:
        try:
            self.metrics.serve(self.port, self.host)
        except OSError as exc:  # a taken port: the agent runs on without metrics, and says so
            self.error = (
                f"metrics: cannot listen on {self.host}:{self.port} ({exc.strerror or exc}); "
                f"set another [metrics] port in agent.toml"
            )
            log.error(self.error)
            return
        self.queue = PushQueue(5000)
        self.pushes.subscribers.add(self.queue)
        self.task = spawn(self._events(self.queue), "metrics-events")
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def _events(self, queue: PushQueue) -> None:
        while True:
            msg = await queue.get()
            if isinstance(msg, dict) and msg.get("push") == "event":
                try:
                    self.metrics.on_event(msg.get("data") or {})
                except Exception:
                    log.exception("metrics: event")

    async def close(self) -> None:
        if self.queue is not None:
            self.pushes.subscribers.discard(self.queue)
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        # shutdown() waits for the serving thread's loop; off the agent's loop.
        await asyncio.to_thread(self.metrics.close)
