"""The state the events fold into: the views of slots, benches, the agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec import Struct

from sgltui.protocol.base import BenchState, SlotState
from sgltui.protocol.events import BenchProgress, Cause

# ---- the state the events fold into -----------------------------------------------------------


class FromTo(Struct, kw_only=True, rename={"from_": "from"}):
    """A swap as the state shows it: from one profile to another."""

    from_: str | None = None
    to: str | None = None


class SwapView(FromTo, kw_only=True):
    step: str = ""
    started_at: float | None = None
    elapsed_s: float | None = None
    rollback: bool = True  # a failure relaunches the profile it left (restart: False)
    client: str | None = None  # who asked for it


class FrontView(Struct, kw_only=True):
    """The slot's stable front endpoint (sgltui/agent/pools/front.py). Counts are since the agent
    started; `held_now` and `in_flight` are the live agent's."""

    url: str | None = None
    state: Literal["routing", "holding", "no server", "error"] = "no server"
    backend: str | None = None
    held_now: int = 0
    holding_for_s: float | None = None
    in_flight: int = 0
    hold_s: float | None = None
    hold_max: int | None = None
    error: str | None = None
    served: int = 0
    held: int = 0
    rejected: int = 0
    cut: int = 0
    upstream_errors: int = 0


class StopView(Struct, kw_only=True):
    """How the slot's latest stop went: which signal ended the server and what it cut."""

    at: float | None = None
    launch_id: str | None = None
    signal: Literal["SIGTERM", "SIGKILL"] | None = None
    drain: str | None = None
    drain_timed_out: bool = False
    requests_at_sigterm: int | None = None
    requests_at_sigkill: int | None = None
    timings_s: dict[str, float | None] = {}


class LastSwap(FromTo, kw_only=True):
    """How the slot's latest swap or restart ended (the agent's `last_swap`)."""

    ok: bool = False
    rolled_back: bool = False
    timings_s: dict[str, float | None] = {}
    cause: Cause | None = None
    finished_at: float | None = None
    client: str | None = None
    kind: Literal["warm", "cold"] = "cold"  # warm: a standby was woken (agent/swap/standby.py)
    seconds: float | None = None  # keystroke (accepted) to serving


class ResolvedView(Struct, kw_only=True):
    """A profile as resolved when its command was accepted (agent/slot/resolved.py
    Resolved.describe): what runs, where it came from, a hash of its content; no secrets."""

    name: str
    launcher: str | None = None
    interpreter: str | None = None
    key: str | None = None
    sources: list[str] = []
    content_hash: str | None = None
    resolved_at: float | None = None


class CapacityBound(Struct, kw_only=True):
    """What bounds max running requests (core/capacity.py bound)."""

    by: str  # kv | mamba | flag | speculative | pool
    text: str


class CapacityCard(Struct, kw_only=True):
    """What a launch's server actually allocated, from its own words (core/capacity.py). Fields
    may be added, never removed: viewers read them."""

    weights_gb: float | None = None
    kv_pool_tokens: int | None = None
    kv_pool_gb: float | None = None
    max_running_requests: int | None = None
    requested_max_running_requests: int | None = None
    mamba_state_slots: int | None = None
    hicache_host_gb: float | None = None
    cuda_graph_bs: int | list[int] | None = None
    context_length: int | None = None
    draft_weights_gb: float | None = None
    notes: list[str] = []
    draft_kv_gb: float | None = None
    kv_dtype: str | None = None
    mamba_state_gb: float | None = None
    hicache_host_tokens: int | None = None
    graph_gb: float | None = None
    available_gpu_mem_gb: float | None = None
    chunked_prefill_size: int | None = None
    speculative_algorithm: str | None = None
    tp_size: int | None = None
    startup_timings_s: dict[str, float] | None = None
    mamba_strategy: str | None = None
    mamba_slots_per_request: int | None = None
    mamba_slots_held_per_request: int | None = None
    sources: list[str] = []
    bound: CapacityBound | None = None


def capacity_card(data: Any) -> CapacityCard | None:
    """A card as the agent's telemetry or a recorded event has it, read leniently: a value of
    another type (a newer agent's, an odd server log's) costs that field, not the card."""
    if isinstance(data, CapacityCard) or data is None:
        return data
    if not isinstance(data, Mapping):
        return None
    try:
        return msgspec.convert(data, CapacityCard, strict=False)
    except msgspec.ValidationError:
        pass
    good: dict[str, Any] = {}
    for name in CapacityCard.__struct_fields__:
        if name in data:
            try:
                msgspec.convert({name: data[name]}, CapacityCard, strict=False)
                good[name] = data[name]
            except msgspec.ValidationError:
                continue
    return msgspec.convert(good, CapacityCard, strict=False)


class SlotView(Struct, kw_only=True):
    """A slot as STATUS shows it; the fields events determine (pids, uptime and the like are
    the live agent's)."""

    id: str
    profile: str | None = None
    state: SlotState = SlotState.STOPPED
    phase: str | None = None
    progress: float | None = None
    eta_s: float | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    pid: int | None = None
    pids: list[int] = []
    launch_id: str | None = None
    log_path: str | None = None
    started_at: float | None = None
    ready_at: float | None = None
    command: list[str] = []
    command_hash: str | None = None
    cause: Cause | None = None
    capacity: CapacityCard | None = None
    swap: SwapView | None = None
    api_key_set: bool = False
    front: FrontView | None = None
    last_stop: StopView | None = None
    last_failure: dict[str, Any] | None = None  # the latest failure, kept after a recovery
    resolved: ResolvedView | None = None  # the resolved profile it runs (agent/slot/resolved.py)
    last_swap: LastSwap | None = None


class BenchProgressView(Struct, kw_only=True):
    """A bench run's latest progress: the bench.progress event's figures (BenchProgress less
    its envelope; a test keeps the two alike)."""

    run_id: str = ""
    state: BenchState | None = None
    profile: str | None = None
    concurrency: int | None = None
    repeat: int | None = None
    point: int | None = None
    points: int | None = None
    phase: str | None = None
    done: int | None = None
    failed: int | None = None
    total: int | None = None
    in_flight: int | None = None
    out_tokens: int | None = None
    elapsed: float | None = None
    error: str | None = None
    path: str | None = None


def bench_progress_view(ev: BenchProgress) -> BenchProgressView:
    return BenchProgressView(**{k: getattr(ev, k) for k in BenchProgressView.__struct_fields__})


class BenchView(Struct, kw_only=True):
    run_id: str
    state: BenchState = BenchState.RUNNING
    started: float | None = None
    path: str | None = None
    progress: BenchProgressView | None = None


class DiskView(Struct, kw_only=True):
    """The session's disk (session/writer.py Recorder.disk): ok is False while writes fail."""

    ok: bool = True
    error: str | None = None
    path: str | None = None
    since: float | None = None  # when writes began to fail
    free_bytes: int | None = None
    warning: str | None = None  # little space left
    dropped_events: int = 0
    dropped_samples: int = 0
    backlog: int = 0  # events waiting for the disk


class AgentView(Struct, kw_only=True):
    pid: int | None = None
    version: str | None = None
    started: float | None = None


class ProfileSeen(Struct, kw_only=True):
    name: str
    key: str | None = None
    description: str = ""
    launcher: str | None = None
