"""What the simulated scheduler (sim/scheduler.py) tells: its "Prefill batch" and "Decode batch"
log lines as SGLang prints them, and its load snapshots (`stats`) to the main process, at most
every STATS_PERIOD_S unless a report is due."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from sgltui.sim.memory import MemoryPlan, SpecConfig
from sgltui.sim.prefix_cache import PrefixCache
from sgltui.sim.request import Req

log = logging.getLogger("sglang")

STATS_PERIOD_S = 0.25  # wall seconds between load snapshots to the main process


class Gauges(Protocol):
    """What the report reads of the scheduler (and the two figures it resets)."""

    plan: MemoryPlan
    spec: SpecConfig | None
    cache: PrefixCache
    hybrid: bool
    scale: float
    waiting: deque[Req]
    running: list[Req]
    chunked: Req | None
    total_tokens: int
    slots_used: int
    slots_total: int
    last_gen_throughput: float
    busy_since_snapshot: float
    cache_hit_rate: float
    spec_accept_length: float
    spec_accept_rate: float
    new_token_ratio: float
    retracted_total: int
    total_prefill_uncached: int
    total_prefill_busy_s: float
    pcie_rx_bytes: float
    realtime: dict[str, int]
    prefill_hits: dict[str, int]
    vclock: float
    emit: Callable[[str, Any], None]  # (kind, payload) -> the main process

    @property
    def busy_tokens(self) -> int: ...

    @property
    def available_tokens(self) -> int: ...

    @property
    def idle(self) -> bool: ...


class SchedulerReport:
    """The scheduler's log lines and load snapshots; holds what it last published."""

    def __init__(self, sched: Gauges) -> None:
        self.s = sched
        self.reported_running = 0  # the gauges as last published (report=True snapshots)
        self.reported_gen_throughput = 0.0
        self.last_snapshot_wall = 0.0

    def usage_parts(self, decode: bool) -> str:
        s = self.s
        usage = s.busy_tokens / s.total_tokens if s.total_tokens else 0.0
        if s.hybrid:
            mamba = s.slots_used / s.slots_total if s.slots_total else 0.0
            if decode:
                return (
                    f"#full token: {s.busy_tokens}, full token usage: {usage:.2f}, "
                    f"mamba num: {s.slots_used}, mamba usage: {mamba:.2f}"
                )
            return f"full token usage: {usage:.2f}, mamba usage: {mamba:.2f}"
        if decode:
            return f"#token: {s.busy_tokens}, token usage: {usage:.2f}"
        return f"token usage: {usage:.2f}"

    def log_prefill(
        self, nseq: int, new_tokens: int, cached: int, throughput: float, running: int
    ) -> None:
        s = self.s
        pending = sum(r.seq_len for r in s.waiting)
        log.info(
            f"Prefill batch, #new-seq: {nseq}, #new-token: {new_tokens}, #cached-token: {cached}, "
            f"{self.usage_parts(False)}, #running-req: {running}, "
            f"#queue-req: {len(s.waiting)}, #pending-token: {pending}, cuda graph: False, "
            f"input throughput (token/s): {throughput:.2f}"
        )

    def log_decode(self) -> None:
        s = self.s
        spec = ""
        if s.spec:
            spec = (
                f"accept len: {s.spec_accept_length:.2f}, accept rate: {s.spec_accept_rate:.2f}, "
            )
        graph = len(s.running) <= max(s.plan.cuda_graph_bs)
        log.info(
            f"Decode batch, #running-req: {len(s.running)}, {self.usage_parts(True)}, {spec}"
            f"cuda graph: {graph}, gen throughput (token/s): {s.last_gen_throughput:.2f}, "
            f"#queue-req: {len(s.waiting)}"
        )

    def idle_refresh(self) -> None:
        self.s.last_gen_throughput = 0.0
        self.snapshot(report=True)

    @property
    def gauges_stale(self) -> bool:
        """The last published gauges still show work the scheduler no longer has. SGLang 0.5.23
        republishes at once then, with gen_throughput 0 (scheduler_components/metrics_reporter.py,
        _maybe_log_idle_metrics: `gauge_stale`), instead of waiting out its 30 s idle window."""
        s = self.s
        running = len(s.running) + (1 if s.chunked else 0)
        return self.reported_running != running or (s.idle and self.reported_gen_throughput != 0.0)

    def snapshot(self, report: bool) -> None:
        s = self.s
        now = time.monotonic()
        if not report and now - self.last_snapshot_wall < STATS_PERIOD_S:
            return
        wall = max(1e-6, now - self.last_snapshot_wall) if self.last_snapshot_wall else 1.0
        self.last_snapshot_wall = now
        usage = s.busy_tokens / s.total_tokens if s.total_tokens else 0.0
        mamba = s.slots_used / s.slots_total if s.slots_total else 0.0
        busy_wall = s.busy_since_snapshot * s.scale if s.scale > 0 else (0.0 if s.idle else wall)
        rx = s.pcie_rx_bytes
        tx = s.cache.backup_tokens * s.plan.kv_cell_eff_bytes
        if report:
            self.reported_running = len(s.running) + (1 if s.chunked else 0)
            self.reported_gen_throughput = s.last_gen_throughput
        s.emit(
            "stats",
            {
                "report": report,
                "num_running_reqs": len(s.running) + (1 if s.chunked else 0),
                "num_queue_reqs": len(s.waiting),
                "num_waiting_uncached_tokens": sum(r.seq_len for r in s.waiting),
                "num_used_tokens": s.busy_tokens,
                "kv_used_tokens": s.busy_tokens,
                "kv_evictable_tokens": s.cache.evictable_tokens(),
                "kv_available_tokens": s.available_tokens,
                "max_total_num_tokens": s.total_tokens,
                "token_usage": max(usage, mamba),
                "full_token_usage": usage,
                "mamba_usage": mamba,
                "mamba_used": s.slots_used,
                "mamba_total": s.slots_total,
                "gen_throughput": s.last_gen_throughput,
                "cache_hit_rate": s.cache_hit_rate,
                "spec_accept_length": s.spec_accept_length if s.spec else 0.0,
                "spec_accept_rate": s.spec_accept_rate if s.spec else 0.0,
                "new_token_ratio": s.new_token_ratio,
                "num_retracted_reqs_total": s.retracted_total,
                "decode_sum_seq_lens": sum(r.seq_len for r in s.running),
                "utilization": min(1.0, busy_wall / wall),
                "total_prefill_uncached_tokens": s.total_prefill_uncached,
                "total_prefill_busy_us": int(s.total_prefill_busy_s * 1e6),
                "hicache_host_used_tokens": s.cache.host_tokens,
                "hicache_host_total_tokens": s.plan.hicache_host_tokens,
                "hicache_host_mamba_used_states": len(s.cache.host_states),
                "hicache_host_mamba_total_states": s.plan.hicache_host_mamba_states,
                "pcie_rx_total_bytes": rx,
                "pcie_tx_total_bytes": tx,
                "evicted_tokens_total": s.cache.evicted_tokens,
                "hicache_backup_tokens_total": s.cache.backup_tokens
                if s.plan.hicache_host_tokens
                else 0,
                "realtime_tokens": dict(s.realtime),
                "prefill_effective": dict(s.prefill_hits),
                "is_cuda_graph": 1
                if s.running and len(s.running) <= max(s.plan.cuda_graph_bs)
                else 0,
                "vclock": s.vclock,
                "ts": time.time(),
            },
        )
        s.busy_since_snapshot = 0.0
