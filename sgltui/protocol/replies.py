"""The results of the ops whose shape others build on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec import Struct, field

from sgltui.protocol.args import BenchSpec
from sgltui.protocol.base import BenchState, JobState, SlotState
from sgltui.protocol.events import Cause, JobChoice, JobTarget
from sgltui.protocol.views import BenchProgressView, DiskView, ProfileSeen, ResolvedView, SlotView

# ---- replies ----------------------------------------------------------------------------------
# The results of the ops whose shape others build on (unknown keys allowed: areas add fields).


class HelloReply(Struct, kw_only=True):
    version: str
    protocol: int
    pid: int


class PingReply(Struct, kw_only=True):
    pong: bool
    pid: int
    version: str


class Subscribed(Struct, kw_only=True):
    subscribed: bool


class ShutdownReply(Struct, kw_only=True):
    stopping: bool
    stop_servers: bool


class LogsReply(Struct, kw_only=True):
    lines: list[str]
    path: str
    launch_id: str


class TimelineReply(Struct, kw_only=True):
    series: dict[str, list[tuple[float, float | None]]]


class ProfileRow(ProfileSeen, kw_only=True):
    port: int | None = None
    key_clash: list[str] = []  # other profiles on the same key (the key does nothing)
    valid: bool = True  # the first error is `problem` (core/validate.py, or the file's own)
    problem: str = ""
    # HiCache profiles: the host pool (GiB, all ranks) and, when it is more than the RAM it
    # would get, the line that says so; host_pool_note says why it is not known before start.
    host_pool_gib: float | None = None
    host_pool_problem: str = ""
    host_pool_how: str = ""
    host_pool_note: str = ""


class DrainView(Struct, kw_only=True):
    """A stop waiting for the requests in flight (the slot.drain event's figures)."""

    requests: int | None = None
    left_s: float | None = None
    timeout_s: float | None = None


class StandbyView(Struct, kw_only=True):
    """A profile kept warm beside a slot's server: its own server process, asleep (paused, its
    weights in pinned host RAM, `gpu_bytes` left on the GPU: CUDA context and untagged buffers)."""

    profile: str
    state: Literal["starting", "asleep", "lost"] = "starting"
    host_bytes: int = 0  # measured after its release (the estimate until then)
    gpu_bytes: int = 0
    port: int | None = None
    pid: int | None = None
    accept_length: float | None = None  # the draft's, last measured (MTP profiles)
    host_estimate_bytes: int = 0  # what was said before it was added
    gpu_estimate_bytes: int = 0
    measured: bool = False  # host_bytes/gpu_bytes measured (else the estimates)


class ExternalView(Struct, kw_only=True):
    """A slot's server that sgltui did not start (agent/slot/attach.py): watched, never stopped."""

    url: str
    pid: int | None = None  # None: a remote URL (no lifecycle, no GPU)
    model: str | None = None
    version: str | None = None
    attached_at: float | None = None
    info_hash: str | None = None


class Unmanaged(Struct, kw_only=True):
    """An SGLang server of this user on this host that the agent did not start
    (agent/slot/discovery.py); `url` None while it does not listen yet."""

    pid: int
    port: int | None = None
    url: str | None = None
    model: str | None = None
    kind: str = "sglang"
    version: str | None = None
    note: str | None = None


class SlotStatus(SlotView, kw_only=True):
    """A slot in STATUS: what events say (SlotView) and what only the live agent knows."""

    external: ExternalView | None = None  # attached, not launched by sgltui
    uptime_s: float | None = None
    busy: str | None = None
    restart: str | None = None  # what the restart policy did after a crash (relaunch, gave up)
    # a ready server that does not answer (SIGSTOP, a wedge), and why (agent/slot/liveness.py)
    unresponsive: str | None = None
    drain: DrainView | None = None  # while a stop waits for requests in flight
    gpus: list[int] = []  # the GPUs host.toml gives the slot (empty: not placed)
    standbys: list[StandbyView] = []  # profiles kept warm beside its server (agent/swap/standby.py)


class PoolGateway(Struct, kw_only=True):
    """The process in front of a pool's workers (smg for 2+ slots, the agent's front for one)."""

    pid: int | None = None
    state: str = ""


class PoolWorker(Struct, kw_only=True):
    slot: str
    url: str | None = None
    gateway_status: str | None = None  # what the gateway says of this worker (ready, removed...)


class RollView(Struct, kw_only=True):
    """A pool's latest rolling swap (agent/pools/pools.py keeps it as this, and changes it as it goes)."""

    state: Literal["rolling", "stopped", "done"] = "rolling"
    # A rolling swap, or a fleet.toml pool's `up` (its members started, then routed), which
    # the fleet TUI shows the same way while it runs.
    kind: Literal["roll", "up"] = "roll"
    profile: str | None = None  # what the pool rolls to
    slot: str | None = None  # the slot it is at (rolling) or stopped at
    done: list[str] = []  # the slots that run `profile` now
    error: str | None = None  # why it stopped
    started: float | None = None
    finished: float | None = None


class PoolStatus(Struct, kw_only=True):
    """A pool of slots behind one endpoint (host.toml's [[pool]])."""

    name: str
    endpoint: str | None = None
    slots: list[str] = []
    gateway: PoolGateway | None = None
    workers: list[PoolWorker] = []
    profiles: list[str] = []  # what its slots run (two or more: the pool serves mixed)
    roll: RollView | None = None  # the latest rolling swap
    note: str | None = None  # e.g. "mixed: a runs mtp, b runs base (roll stopped at b: ...)"
    error: str | None = None  # its gateway could not start (smg missing, port taken)
    metrics: dict[str, Any] | None = None  # the gateway's: restarts, retries, errors, per worker
    # A fleet.toml pool whose gateway runs on this host (agent/pools/remote.py): its `slots`
    # and workers' `slot` are fleet names (host/slot) already, and its members run elsewhere.
    across_hosts: bool = False


class Exposed(Struct, kw_only=True):
    """A slot served to another host's gateway: where it answers and the key it requires.
    `applied`: the running server already does (else at its next launch)."""

    slot: str
    url: str | None = None
    api_key: str | None = None
    applied: bool = False
    profile: str | None = None  # what the server that serves so runs (applied only)


class Attached(Struct, kw_only=True):
    """The reply to attach / adopt / detach."""

    slot: str
    url: str | None = None
    pid: int | None = None
    model: str | None = None
    version: str | None = None
    profile: str | None = None  # adopt: the profile it now runs
    path: str | None = None  # adopt: the profile file written
    info_hash: str | None = None


class KeeperView(Struct, kw_only=True):
    """The agent's keeper (agent/keeper.py), from its keeper.json: how often it had to start
    the agent again, and why the last one ended."""

    pid: int
    state: str  # "running" | "backoff"
    restarts: int = 0
    crashes_in_a_row: int = 0
    last_exit: str | None = None
    last_exit_at: float | None = None
    next_start_at: float | None = None  # in a back-off


class AgentInfo(Struct, kw_only=True):
    pid: int
    version: str
    started: float
    state_dir: str
    session_dir: str
    socket: str | None = None
    disk: DiskView = field(default_factory=DiskView)
    demo_load: bool = False
    keeper: KeeperView | None = None  # None: run without a keeper (--foreground, SGLTUI_KEEPER=0)
    # The host.toml named by $SGLTUI_HOST_FILE (`sgltui demo` writes its own): None, the user's.
    host_file: str | None = None


class BenchRun(Struct, kw_only=True):
    """A bench run of this agent (agent/children.py): `bench_list`, `bench_stop`, STATUS."""

    run_id: str
    state: BenchState
    started: float
    spec: BenchSpec = field(default_factory=BenchSpec)
    client: str | None = None
    progress: BenchProgressView | None = None
    path: str | None = None
    exit_code: int | None = None
    cut: dict[str, Any] | None = None  # the swap that stopped it (agent/children.py)


class BenchStarted(Struct, kw_only=True):
    run_id: str


class Noted(Struct, kw_only=True):
    """`bench_progress`: the progress was recorded."""

    ok: bool


class DemoLoadReply(Struct, kw_only=True):
    on: bool


class PreflightCheck(Struct, kw_only=True):
    """One check a launch would run (agent/swap/preflight.py)."""

    name: str
    ok: bool
    message: str
    fix: str = ""
    skipped: bool = False  # --force named it


class Pin(Struct, kw_only=True):
    """What holds a slot, so that a swap or restart of it asks first (confirm=true, `--yes`)."""

    by: Literal["lease", "job", "bench"]
    what: str  # "batch job b1 (job-...) is pinned to slot 0": a refusal's words after "swap refused: "


class PreflightReply(Struct, kw_only=True):
    profile: str
    launcher: str | None = None
    ok: bool
    error: str | None = None  # the first failure's line
    checks: list[PreflightCheck] = []
    resolved: ResolvedView | None = None
    # a lease, a pinned job or a bench on the slot: the swap would ask first (agent/slot/pins.py)
    pinned: Pin | None = None


class JobWarmFirst(Struct, kw_only=True):
    """The runner's warm-first order (jobs/warm_first.py): one request per shared prefix first
    on each server whose prefix cache starts empty."""

    key_chars: int  # a prompt's first characters that tell its shared prefix
    distinct: int  # distinct prefixes in the input's first lines
    passes: int = 0  # cold starts so far (this runner's)
    primed: int = 0  # requests the last pass sent first
    left: int = 0  # ... not yet answered (0: the pass ended)
    launch: str | None = None  # the server it was for


class JobSegment(Struct, kw_only=True):
    """What a job sent to one launch: a profile's share of the job."""

    profile: str | None = None
    launch_id: str | None = None
    info_hash: str | None = None  # what its server ran (server.provenance's hash)
    started: float
    last: float
    completions: int = 0
    failed: int = 0
    out_tokens: int = 0
    in_tokens: int = 0  # prompt tokens of its answers (`sgltui advise` reads the job's mean)
    joules: float | None = None  # GPU energy on this launch (None: no power readings)


class JobView(Struct, kw_only=True):
    """A batch job as the agent shows it (agent/jobs/jobs_host.py): every `job_*` op's reply."""

    id: str
    name: str | None = None
    state: JobState
    # Where it sends: a slot, or a pool (None only from an agent older than the field).
    target: JobTarget | None = None
    # A slot job's slot; a pool job's reference slot: the pool's first, whose capacity card
    # and engine readings its automatic concurrency and stall watch read.
    slot: str
    pool: str | None = None  # sent through this pool's endpoint (also in `target`)
    input: str
    output: str
    errors_output: str  # where the failed requests go
    pinned: bool = False  # a swap of the slot must be confirmed
    hold: str | None = None  # why the job is held ("swap"), or None
    waiting_for: str | None = None  # why a waiting job does not send, in words
    concurrency: int
    concurrency_mode: Literal["auto", "fixed"]
    total: int | None = None  # None until the input is checked
    answered: int = 0
    failed: int = 0
    remaining: int | None = None
    in_flight: int = 0
    quiet: bool = False  # the runner stopped sending and nothing is in flight
    out_tokens: int = 0
    retries: int = 0
    conn_errors: int = 0
    completions_s: float = 0.0
    tok_s: float = 0.0
    eta_s: float | None = None
    created: float
    finished: float | None = None
    error: str | None = None
    stalled: str | None = None  # "stalled: <why>": no answer for a while though it may send
    segments: list[JobSegment] = []
    runner_pid: int | None = None
    runner_cpu_s: float | None = None
    warm_first: JobWarmFirst | None = None  # None where the prompts share no prefixes
    # (unix time, tok/s) points: `job_status` only
    rate_history: list[tuple[float, float]] | None = None
    joules: float | None = None  # GPU energy while the job ran (None: no power readings)
    decision: JobChoice | None = None  # --choose: the trial and its decision

    def where(self) -> JobTarget:
        """Where it sends: its target, or (an older agent's view) its pool, else its slot."""
        if self.target is not None:
            return self.target
        return (
            JobTarget(kind="pool", name=self.pool)
            if self.pool
            else JobTarget(kind="slot", name=self.slot)
        )


class GpuProcess(Struct, kw_only=True):
    """A process holding GPU memory, and the slot it belongs to (None: not ours)."""

    pid: int
    used_bytes: int = 0
    slot: str | None = None
    match: str | None = None  # how it was matched to the slot ("pid", ...)
    name: str | None = None


class GpuView(Struct, kw_only=True):
    """One GPU's latest reading (agent/gpu/reading.py empty_gpu has every field)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    simulated: bool | None = False
    total_bytes: int | None = None
    used_bytes: int | None = None
    free_bytes: int | None = None
    utilization_pct: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    pcie_rx_bytes_s: float | None = None
    pcie_tx_bytes_s: float | None = None
    server_bytes: dict[str, int] = {}  # slot -> bytes its server holds here
    breakdown_bytes: dict[str, int] | None = None  # the simulator's: weights, kv, ...
    processes: list[GpuProcess] = []
    host: str | None = None  # a fleet's: the host the GPU is on
    preset: str | None = None  # the simulator's: the GPU it plays (sim/ presets)


class HostView(Struct, kw_only=True):
    """The host's latest reading (agent/telemetry/host.py)."""

    ram_total_bytes: int | None = None
    ram_used_bytes: int | None = None
    ram_available_bytes: int | None = None
    swap_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    cpu_pct: float | None = None
    cpu_count: int | None = None
    server_rss_bytes: dict[str, int] = {}  # slot -> its server's resident memory
    server_cpu_pct: dict[str, float] = {}
    server_pinned_bytes: dict[str, int] = {}  # slot -> pinned host memory (hicache)


class GpuSourceView(Struct, kw_only=True):
    kind: str = "none"  # "nvml" | "sim" | "none"
    message: str = ""


class TelemetryView(Struct, kw_only=True):
    """STATUS.telemetry, and what a `sample` push carries: the latest readings of every source.

    `engine` (slot -> the server's figures) stays JSON values: its names are SGLang's /metrics
    and /v1/loads figures, which grow with SGLang, and core/ reads them (charts, insight)."""

    ts: float = 0.0
    gpus: list[GpuView] = []
    gpu_source: GpuSourceView = field(default_factory=GpuSourceView)
    host: HostView | None = None
    engine: dict[str, dict[str, Any]] = {}


def telemetry_view(data: Any) -> TelemetryView:
    """Telemetry as the agent's sampler, a recorded sample or an older agent has it, read
    leniently: a GPU or figure that does not read costs that part, not the pane."""
    src = dict(data) if isinstance(data, Mapping) else {}
    if not src.get("host"):
        src["host"] = None  # before the first host sample: {} or None
    try:
        return msgspec.convert(src, TelemetryView, strict=False)
    except msgspec.ValidationError:
        pass
    good: dict[str, Any] = {}
    for name in TelemetryView.__struct_fields__:
        if name not in src:
            continue
        value = src[name]
        if name == "gpus" and isinstance(value, list):
            value = [g for g in value if _reads({"gpus": [g]})]
        if _reads({name: value}):
            good[name] = value
    return msgspec.convert(good, TelemetryView, strict=False)


def _reads(part: dict[str, Any]) -> bool:
    try:
        msgspec.convert(part, TelemetryView, strict=False)
    except msgspec.ValidationError:
        return False
    return True


class LeaseView(Struct, kw_only=True):
    """A lease on a profile: the agent endpoint never evicts it (agent/endpoint/leases.py)."""

    profile: str
    holder: str  # "job NAME (ID)" or "CLIENT by hand"
    kind: Literal["job", "hand"] = "hand"
    slot: str | None = None
    until: float | None = None  # unix time; None: until dropped (a job's: while it runs)


class EndpointView(Struct, kw_only=True):
    """The agent's one OpenAI endpoint (agent/endpoint/endpoint.py): where, what waits, who holds."""

    url: str | None = None
    state: str = "off"  # listening | error | off
    error: str | None = None
    queue: dict[str, int] = {}  # profile -> requests waiting for it to wake or start
    leases: list[LeaseView] = []
    last_eviction: dict[str, Any] | None = None  # slot, profile, for, why, at
    swaps: int = 0  # request-driven swaps, starts and stops begun since the agent started
    refused: int = 0  # requests answered 503


class StatusReply(Struct, kw_only=True):
    agent: AgentInfo
    slots: list[SlotStatus]
    profiles: list[ProfileRow] = []
    telemetry: TelemetryView = field(default_factory=TelemetryView)
    bench: BenchRun | None = None  # the latest run
    jobs: list[JobView] = []
    pools: list[PoolStatus] = []
    unmanaged: list[Unmanaged] = []  # servers of this user the agent did not start
    endpoint: EndpointView | None = None  # the agent's OpenAI endpoint (agent/endpoint/endpoint.py)


class StopReport(Struct, kw_only=True):
    """How a stop went (agent/slot/slot.py Slot.stop): timings, what is still held, what it cut."""

    timings_s: dict[str, float] = {}
    left_pids: list[int] = []
    gpu_bytes_held: int = 0
    port_free: bool = True
    release_method: str | None = None
    problems: list[str] = []
    signal: Literal["SIGTERM", "SIGKILL"] | None = None
    drain_timed_out: bool = False
    requests_at_sigterm: int | None = None
    requests_at_sigkill: int | None = None


class Outcome(Struct, kw_only=True):
    """What a lifecycle command's job came to (`wait`): one shape for every op. A launch sets
    state and cause; a stop its report; a swap or restart ok, rolled_back, timings_s and the
    cause of a failure; a job that was cancelled (a stop aborted it) or broke says so."""

    state: SlotState | None = None
    ok: bool | None = None
    rolled_back: bool = False
    timings_s: dict[str, float] = {}
    cause: Cause | None = None
    report: StopReport | None = None
    cancelled: bool = False
    error: str | None = None  # an internal failure (its traceback is in agent.log)


class PoolResult(Struct, kw_only=True):
    """What an op on a pool (--pool) did: every slot of the pool, and the roll of a swap."""

    pool: str
    slots: list[SlotStatus] = []
    roll: RollView | None = None


class Accepted(Struct, kw_only=True):
    """A lifecycle command's reply: accepted at once, or (`wait`) its outcome. On a pool, `slot`
    is its first slot and `pool` says what happened to each (`result` stays None)."""

    slot: SlotStatus
    accepted: bool = False
    result: Outcome | None = None
    profile_changed: bool | None = None  # restart: the profile file was edited since the launch
    pool: PoolResult | None = None
