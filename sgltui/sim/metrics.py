"""Prometheus metrics with SGLang's names, types and labels (sglang/srt/metrics/collector.py).

Scheduler gauges are refreshed from the scheduler's reports (each prefill batch, every
decode-log-interval steps, and an idle refresh), request histograms/counters from the main
process as requests finish. A labelled series appears only after its first update, as in SGLang.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_TTFT_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
    10.0,
    20.0,
    40.0,
    60.0,
    80.0,
    100.0,
    200.0,
    400.0,
)
_ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
# SGLang's end-to-end buckets are its TTFT buckets and a longer tail.
_E2E_BUCKETS = (*_TTFT_BUCKETS, 600.0, 1200.0, 1800.0, 2400.0)
_TOKEN_BUCKETS = (
    100,
    300,
    500,
    1000,
    1200,
    1500,
    1700,
    2000,
    2500,
    3000,
    3500,
    4000,
    4500,
    5000,
    6000,
    7000,
    8000,
    9000,
    10000,
    12000,
    15000,
    20000,
    22000,
    25000,
    30000,
    35000,
    40000,
)

_SCHED_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
_TOK_LABELS = ("model_name", "engine_type")

# (metric, stats key) for gauges refreshed from scheduler reports; always exported.
_SCHED_GAUGES = (
    ("num_running_reqs", "num_running_reqs", "The number of running requests."),
    ("num_queue_reqs", "num_queue_reqs", "The number of requests in the waiting queue."),
    ("num_grammar_queue_reqs", None, "The number of requests in the grammar waiting queue."),
    ("num_used_tokens", "num_used_tokens", "The number of used tokens."),
    ("token_usage", "token_usage", "The token usage."),
    ("full_token_usage", "full_token_usage", "The token usage of the full-attention pool."),
    ("swa_token_usage", None, "The token usage of the SWA pool."),
    ("mamba_usage", "mamba_usage", "The usage of the mamba state pool."),
    ("gen_throughput", "gen_throughput", "The generation throughput (token/s)."),
    ("cache_hit_rate", "cache_hit_rate", "The prefix cache hit rate."),
    ("kv_available_tokens", "kv_available_tokens", "Free slots of the full KV pool."),
    ("kv_evictable_tokens", "kv_evictable_tokens", "Evictable slots of the full KV pool."),
    ("kv_used_tokens", "kv_used_tokens", "Locked slots of the full KV pool."),
    ("decode_sum_seq_lens", "decode_sum_seq_lens", "Sum of sequence lengths in the decode batch."),
    ("num_retracted_reqs", None, "The number of retracted requests."),
    ("num_paused_reqs", None, "The number of paused requests."),
    ("utilization", "utilization", "The utilization."),
    ("new_token_ratio", "new_token_ratio", "The new token ratio."),
    ("is_cuda_graph", "is_cuda_graph", "Whether the batch is using CUDA graph."),
    (
        "spec_accept_length",
        "spec_accept_length",
        "The average acceptance length of speculative decoding.",
    ),
    (
        "spec_accept_rate",
        "spec_accept_rate",
        "The average acceptance rate of speculative decoding.",
    ),
)


_RADIX_LABELS = ("cache_type", "tp_rank", "pp_rank")
_SCHED_MODE = (*_SCHED_LABELS, "mode")
_SCHED_PHASE = (*_SCHED_LABELS, "phase")
_TOK_STREAMING = (*_TOK_LABELS, "is_streaming")
_RADIX_POOL = (*_RADIX_LABELS, "pool")

_BUCKETS = {
    "time_to_first_token_seconds": _TTFT_BUCKETS,
    "inter_token_latency_seconds": _ITL_BUCKETS,
    "request_time_per_output_token_seconds": _ITL_BUCKETS,
    "e2e_request_latency_seconds": _E2E_BUCKETS,
    "prompt_tokens_histogram": _TOKEN_BUCKETS,
    "generation_tokens_histogram": _TOKEN_BUCKETS,
}

# (type, SGLang's name without "sglang:", help, labels, exported only with: "" always,
# "hicache", "hicache+hybrid"). Registration order is the order of /metrics: SGLang's.
_METRICS: tuple[tuple[type[Gauge | Counter | Histogram], str, str, tuple[str, ...], str], ...] = (
    (Gauge, "spec_num_steps", "Active speculative steps.", _SCHED_LABELS, ""),
    (Gauge, "spec_num_draft_tokens", "Active draft tokens.", _SCHED_LABELS, ""),
    (Gauge, "hicache_host_used_tokens", "Host KV pool used tokens.", _SCHED_LABELS, "hicache"),
    (Gauge, "hicache_host_total_tokens", "Host KV pool total tokens.", _SCHED_LABELS, "hicache"),
    (
        Gauge,
        "hicache_host_mamba_used_states",
        "Number of state slots currently used in the host Mamba cache (hybrid-SSM models only).",
        _SCHED_LABELS,
        "hicache+hybrid",
    ),
    (
        Gauge,
        "hicache_host_mamba_total_states",
        "Total capacity of the host Mamba cache in state slots (hybrid-SSM models only).",
        _SCHED_LABELS,
        "hicache+hybrid",
    ),
    (
        Counter,
        "load_back_tokens",
        "Host->device loaded tokens.",
        _RADIX_POOL,
        "hicache",
    ),
    (
        Counter,
        "hicache_backup_tokens",
        "Device->host backed-up tokens.",
        _RADIX_POOL,
        "hicache",
    ),
    (Counter, "evicted_tokens", "Device slots freed by eviction.", _RADIX_LABELS, ""),
    (Counter, "num_retracted_requests", "Retracted requests.", _SCHED_LABELS, ""),
    (Counter, "realtime_tokens", "Tokens processed.", _SCHED_MODE, ""),
    (Counter, "prefill_effective_tokens", "Prefill tokens by cache source.", _SCHED_MODE, ""),
    # Start-up constants.
    (Gauge, "max_total_num_tokens", "Maximum total tokens.", _SCHED_LABELS, ""),
    (Gauge, "weight_memory_usage_gb", "Weight memory (GB).", _SCHED_LABELS, ""),
    (Gauge, "kv_cache_memory_usage_gb", "KV cache memory (GB).", _SCHED_LABELS, ""),
    (Gauge, "graph_memory_usage_gb", "CUDA graph memory (GB).", _SCHED_PHASE, ""),
    (Gauge, "page_size", "Page size.", _SCHED_LABELS, ""),
    (Gauge, "num_pages", "Number of pages.", _SCHED_LABELS, ""),
    (Gauge, "context_len", "Context length.", _SCHED_LABELS, ""),
    (
        Gauge,
        "startup_available_gpu_memory_gb",
        "Available GPU memory at start-up (GB).",
        _SCHED_LABELS,
        "",
    ),
    (Gauge, "startup_time_seconds", "Start-up time per phase.", _SCHED_PHASE, ""),
    # Request-level (tokenizer) metrics.
    (Histogram, "time_to_first_token_seconds", "Time to first token.", _TOK_STREAMING, ""),
    (Histogram, "inter_token_latency_seconds", "Inter-token latency.", _TOK_LABELS, ""),
    (
        Histogram,
        "request_time_per_output_token_seconds",
        "Time per output token.",
        _TOK_STREAMING,
        "",
    ),
    (Histogram, "e2e_request_latency_seconds", "End-to-end request latency.", _TOK_STREAMING, ""),
    (Counter, "prompt_tokens", "Prefill tokens processed.", _TOK_STREAMING, ""),
    (Counter, "generation_tokens", "Generation tokens processed.", _TOK_STREAMING, ""),
    (Counter, "num_requests", "Requests processed.", _TOK_STREAMING, ""),
    (
        Counter,
        "cached_tokens",
        "Prompt tokens served from cache.",
        (*_TOK_LABELS, "cache_source"),
        "",
    ),
    (Histogram, "prompt_tokens_histogram", "Prompt tokens per request.", _TOK_LABELS, ""),
    (Histogram, "generation_tokens_histogram", "Generation tokens per request.", _TOK_LABELS, ""),
    (Counter, "num_aborted_requests", "Aborted requests.", _TOK_LABELS, ""),
    (Counter, "spec_verify_calls", "Speculative verify calls.", _TOK_LABELS, ""),
)


class SimMetrics:
    def __init__(self, model_name: str, tp_size: int, hybrid: bool, hicache: bool, spec):
        self.registry = CollectorRegistry(auto_describe=True)
        self.hybrid = hybrid
        self.hicache = hicache
        self.spec = spec
        r = self.registry
        self.sched_labels = {
            "model_name": model_name,
            "engine_type": "unified",
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
        self.tok_labels = {"model_name": model_name, "engine_type": "unified"}
        self.gauges = {
            name: (Gauge(f"sglang:{name}", doc, _SCHED_LABELS, registry=r), key)
            for name, key, doc in _SCHED_GAUGES
        }
        if hybrid:
            for name in ("mamba_available_tokens", "mamba_evictable_tokens", "mamba_used_tokens"):
                self.gauges[name] = (
                    Gauge(f"sglang:{name}", "Mamba state pool slots.", _SCHED_LABELS, registry=r),
                    None,
                )
        exported = {"", "hicache"} if hicache else {""}
        if hicache and hybrid:
            exported.add("hicache+hybrid")
        self.gauge: dict[str, Gauge] = {}
        self.counter: dict[str, Counter] = {}
        self.histogram: dict[str, Histogram] = {}
        for kind, name, doc, labels, only in _METRICS:
            if only not in exported:
                continue
            full = f"sglang:{name}"
            if kind is Histogram:
                self.histogram[name] = Histogram(
                    full, doc, labels, buckets=_BUCKETS[name], registry=r
                )
            elif kind is Counter:
                self.counter[name] = Counter(full, doc, labels, registry=r)
            else:
                self.gauge[name] = Gauge(full, doc, labels, registry=r)
        self._last_counts: dict[str, float] = {}

    def set_constants(self, plan, timings: dict) -> None:
        lab = self.sched_labels
        self.gauge["max_total_num_tokens"].labels(**lab).set(plan.max_total_num_tokens)
        self.gauge["weight_memory_usage_gb"].labels(**lab).set(
            round(plan.weights_bytes / (1 << 30), 2)
        )
        self.gauge["kv_cache_memory_usage_gb"].labels(**lab).set(
            round(plan.kv_pool_bytes / (1 << 30), 2)
        )
        self.gauge["graph_memory_usage_gb"].labels(**lab, phase="decode").set(
            round(plan.graph_bytes / (1 << 30), 2)
        )
        self.gauge["page_size"].labels(**lab).set(1)
        self.gauge["num_pages"].labels(**lab).set(plan.max_total_num_tokens)
        self.gauge["context_len"].labels(**lab).set(plan.context_len)
        self.gauge["startup_available_gpu_memory_gb"].labels(**lab).set(
            round((plan.available_after_pools - plan.graph_bytes) / (1 << 30), 2)
        )
        for phase in ("load_weight", "kv_cache_allocation"):
            if phase in timings:
                self.gauge["startup_time_seconds"].labels(**lab, phase=phase).set(timings[phase])

    def _delta(self, key: str, value: float) -> float:
        prev = self._last_counts.get(key, 0.0)
        self._last_counts[key] = value
        return max(0.0, value - prev)

    def on_stats(self, s: dict) -> None:
        """Counters follow every snapshot (SGLang counts at the event); gauges only the reports
        SGLang publishes them at (prefill batches, decode-log intervals, idle refresh)."""
        self._counters(s)
        if s.get("report"):
            self._gauges(s)

    def _gauges(self, s: dict) -> None:
        lab = self.sched_labels
        for name, (gauge, key) in self.gauges.items():
            if key is not None:
                gauge.labels(**lab).set(s.get(key, 0.0))
            elif name == "mamba_used_tokens":
                gauge.labels(**lab).set(s.get("mamba_used", 0))
            elif name == "mamba_available_tokens":
                gauge.labels(**lab).set(s.get("mamba_total", 0) - s.get("mamba_used", 0))
            else:
                gauge.labels(**lab).set(0)
        self.gauge["spec_num_steps"].labels(**lab).set(self.spec.num_steps if self.spec else 0)
        self.gauge["spec_num_draft_tokens"].labels(**lab).set(
            self.spec.num_draft_tokens if self.spec else 0
        )
        if self.hicache:
            self.gauge["hicache_host_used_tokens"].labels(**lab).set(
                s.get("hicache_host_used_tokens", 0)
            )
            self.gauge["hicache_host_total_tokens"].labels(**lab).set(
                s.get("hicache_host_total_tokens", 0)
            )
            if self.hybrid and s.get("hicache_host_mamba_total_states", 0) > 0:
                self.gauge["hicache_host_mamba_used_states"].labels(**lab).set(
                    s.get("hicache_host_mamba_used_states", 0)
                )
                self.gauge["hicache_host_mamba_total_states"].labels(**lab).set(
                    s["hicache_host_mamba_total_states"]
                )

    def _counters(self, s: dict) -> None:
        lab = self.sched_labels
        for mode, v in s.get("realtime_tokens", {}).items():
            self.counter["realtime_tokens"].labels(**lab, mode=mode).inc(
                self._delta(f"rt:{mode}", v)
            )
        for mode, v in s.get("prefill_effective", {}).items():
            self.counter["prefill_effective_tokens"].labels(**lab, mode=mode).inc(
                self._delta(f"pe:{mode}", v)
            )
        self.counter["num_retracted_requests"].labels(**lab).inc(
            self._delta("retract", s.get("num_retracted_reqs_total", 0))
        )
        radix = {
            "cache_type": "HiRadixCache" if self.hicache else "RadixCache",
            "tp_rank": "0",
            "pp_rank": "0",
        }
        self.counter["evicted_tokens"].labels(**radix).inc(
            self._delta("evict", s.get("evicted_tokens_total", 0))
        )
        if self.hicache:
            self.counter["load_back_tokens"].labels(**radix, pool="kv").inc(
                self._delta("lb", s.get("prefill_effective", {}).get("host_hit", 0))
            )
            self.counter["hicache_backup_tokens"].labels(**radix, pool="kv").inc(
                self._delta("bk", s.get("hicache_backup_tokens_total", 0))
            )

    def on_request_done(
        self,
        streaming: bool,
        ttft: float | None,
        itls: list[float],
        e2e: float,
        prompt: int,
        completion: int,
        cached: dict,
        aborted: bool,
        verify_ct: int,
    ) -> None:
        lab = self.tok_labels
        st = "true" if streaming else "false"
        if aborted:
            self.counter["num_aborted_requests"].labels(**lab).inc()
        if ttft is not None:
            self.histogram["time_to_first_token_seconds"].labels(**lab, is_streaming=st).observe(
                ttft
            )
        for x in itls:
            self.histogram["inter_token_latency_seconds"].labels(**lab).observe(x)
        if completion > 1 and ttft is not None:
            self.histogram["request_time_per_output_token_seconds"].labels(
                **lab, is_streaming=st
            ).observe((e2e - ttft) / (completion - 1))
        self.histogram["e2e_request_latency_seconds"].labels(**lab, is_streaming=st).observe(e2e)
        self.counter["prompt_tokens"].labels(**lab, is_streaming=st).inc(prompt)
        self.counter["generation_tokens"].labels(**lab, is_streaming=st).inc(completion)
        self.counter["num_requests"].labels(**lab, is_streaming=st).inc()
        self.histogram["prompt_tokens_histogram"].labels(**lab).observe(prompt)
        self.histogram["generation_tokens_histogram"].labels(**lab).observe(completion)
        for src in ("device", "host"):
            if cached.get(src):
                self.counter["cached_tokens"].labels(**lab, cache_source=src).inc(cached[src])
        if verify_ct:
            self.counter["spec_verify_calls"].labels(**lab).inc(verify_ct)

    def render(self) -> bytes:
        return generate_latest(self.registry)
