"""Events: what the agent records in events.jsonl and pushes, one Struct per type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import msgspec
from msgspec import Struct

from sgltui.protocol.args import Args, Name
from sgltui.protocol.base import EVENT_SCHEMA, BenchState, CauseKind, SlotState

# ---- events ------------------------------------------------------------------------------------


class Cause(Struct, kw_only=True):
    """Why a server failed or was refused; `kind` is a CauseKind value."""

    kind: str = CauseKind.EXIT.value
    summary: str = ""
    lines: list[str] = []
    fix: str = ""
    exit_code: int | None = None


class EventBase(Struct, kw_only=True, tag_field="type"):
    v: int = EVENT_SCHEMA
    ts: float = 0.0
    client: str | None = None
    slot: str | None = None


class AgentStart(EventBase, tag="agent.start"):
    pid: int | None = None
    version: str | None = None
    session_dir: str | None = None
    state_dir: str | None = None
    reopened: bool = False


class AgentAdopt(EventBase, tag="agent.adopt"):
    ok: bool = False
    profile: str | None = None
    launch_id: str | None = None
    pid: int | None = None
    state: SlotState | None = None


class AgentStop(EventBase, tag="agent.stop"):
    stop_servers: bool = False
    left_running: list[str] = []


class Command(EventBase, tag="command"):
    op: str = ""
    args: dict[str, Any] = {}
    pool: str | None = None  # an op on a host.toml pool's slots (agent/pools/pools.py)


class CommandRefused(EventBase, tag="command.refused"):
    op: str = ""
    reason: str = ""


class PoolEvent(EventBase):
    """An event of a host.toml pool (agent/pools/pools.py) or its gateway (agent/pools/gateway.py)."""

    pool: str = ""


class PoolRoll(PoolEvent, tag="pool.roll", omit_defaults=True):
    """A rolling swap's steps: begin, removed, drained, done (a slot), stopped, end."""

    step: str = ""
    profile: str | None = None
    drained: bool | None = None
    left: int | None = None
    error: str | None = None
    total_s: float | None = None  # "end": the whole roll, begin to end


class GatewayStart(PoolEvent, tag="gateway.start"):
    pid: int | None = None
    endpoint: str | None = None
    adopted: bool = False  # the gateway an earlier agent (killed -9) left, taken over


class GatewayDied(PoolEvent, tag="gateway.died"):
    code: int | None = None


class GatewayRestarted(PoolEvent, tag="gateway.restarted"):
    pid: int | None = None


class GatewayFailed(PoolEvent, tag="gateway.error"):
    error: str = ""


class GatewayStopped(PoolEvent, tag="gateway.stop"):
    """A pool across hosts (fleet.toml) taken down: its gateway ended."""


class PoolWorkerChanged(PoolEvent, tag="pool.worker"):
    """A worker of another host added to or removed from a pool's gateway (its name: host/slot,
    or the URL of one removed)."""

    worker: str | None = None
    url: str | None = None
    step: str = ""  # added | removed
    # set when the agent found the gateway's workers differed from what it must route and
    # mended it (agent/pools/reconcile.py): what was wrong
    repair: str | None = None


class SlotExposed(EventBase, tag="slot.exposed"):
    """A slot served to another host's gateway on `address` with a key (None: back to
    loopback); the key itself is never in an event."""

    address: str | None = None


class SlotAttached(EventBase, tag="slot.attached"):
    """A server sgltui did not start is watched in `slot` (attached), taken over (adopted:
    `profile` is its configuration), or let go (detached). `info_hash`: core/provenance.py."""

    action: Literal["attached", "adopted", "detached"] = "attached"
    url: str | None = None
    pid: int | None = None
    model: str | None = None
    version: str | None = None
    profile: str | None = None
    info_hash: str | None = None


class ServerProvenance(EventBase, tag="server.provenance"):
    """What a ready server runs (core/provenance.py): its /server_info's resolved args (no
    secrets), version, the values SGLang decided, the GPU, under `hash`; results carry the hash."""

    launch_id: str | None = None
    hash: str = ""
    version: str | None = None
    model: str | None = None
    args: dict[str, Any] = {}
    decided: dict[str, Any] = {}
    gpu: dict[str, Any] = {}
    launch_command: str | None = None


class PreflightDone(EventBase, tag="preflight"):
    profile: str | None = None
    ok: bool = True
    checks: list[dict[str, Any]] = []


class ProfileChanged(EventBase, tag="profile.changed"):
    """A restart re-read an edited profile file."""

    profile: str | None = None
    source: str | None = None
    old_hash: str | None = None
    new_hash: str | None = None


class Launch(EventBase, tag="launch"):
    launch_id: str | None = None
    profile: str | None = None
    command: list[str] = []
    command_hash: str | None = None
    log_path: str | None = None
    pid: int | None = None
    host: str | None = None
    port: int | None = None
    api_key_set: bool | None = None


class SlotStateChanged(EventBase, tag="slot.state"):
    state: SlotState | None = None
    prev: SlotState | None = None
    phase: str | None = None
    reason: str | None = None
    cause: Cause | None = None
    profile: str | None = None
    launch_id: str | None = None


class SlotRestart(EventBase, tag="slot.restart"):
    """The restart policy (agent/slot/restart_policy.py) after a crash: relaunching, or giving up."""

    crash: int | None = None  # the crash's number within the policy's window
    in_s: float | None = None
    gave_up: bool = False
    reason: str | None = None


class SlotPhase(EventBase, tag="slot.phase"):
    phase: str | None = None
    progress: float | None = None
    eta_s: float | None = None


class SlotDrain(EventBase, tag="slot.drain"):
    """A drain in progress: requests still running, seconds left of its timeout."""

    requests: int | None = None
    left_s: float | None = None
    timeout_s: float | None = None


class SwapEvent(EventBase, rename={"from_": "from"}):
    """A swap's events name the profile it leaves and the one it goes to."""

    from_: str | None = None
    to: str | None = None


class SwapStep(SwapEvent, tag="swap.step"):
    step: str = ""
    elapsed_s: float | None = None


class SwapDone(SwapEvent, tag="swap.done"):
    ok: bool = False
    rolled_back: bool = False
    aborted: bool = False
    timings_s: dict[str, float | None] = {}
    kind: Literal["warm", "cold"] = "cold"  # warm: a standby woken (agent/swap/standby.py)


class SwapFailure(SwapEvent, tag="swap.failure"):
    cause: Cause | None = None


class FrontHold(EventBase, tag="front.hold"):
    """The slot's front endpoint holds new requests (a swap or a launch is on)."""

    why: str = ""
    in_flight: int = 0


class FrontLetGo(EventBase):
    """The end of a hold: how many requests it held, for how long."""

    held: int = 0
    held_s: float | None = None


class FrontRoute(FrontLetGo, tag="front.route"):
    """The front sends new and held requests to `backend` from now on."""

    backend: str | None = None


class FrontRelease(FrontLetGo, tag="front.release"):
    """No server will come: the front answers 503 with Retry-After."""

    why: str = ""


class EndpointEvent(EventBase, tag="endpoint", omit_defaults=True):
    """The agent endpoint acted for a request (woke, started, evicted, put an idle profile
    away) or could not (a lease, a full queue): `text` says it with its cause."""

    action: str = ""  # wake | start | evict | idle | refused | failed | lease
    profile: str | None = None
    victim: str | None = None
    text: str = ""


class Capacity(EventBase, tag="capacity"):
    launch_id: str | None = None
    card: dict[str, Any] | None = None


class BenchStart(EventBase, tag="bench.start"):
    run_id: str = ""
    spec: dict[str, Any] = {}
    pid: int | None = None
    path: str | None = None  # the result file, rewritten after every point


class BenchProgress(EventBase, tag="bench.progress", forbid_unknown_fields=False):
    """A bench runner's progress, as it reports it (`bench_progress`) and the agent records it."""

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


class BenchProgressArgs(BenchProgress, Args, forbid_unknown_fields=False):
    """`bench_progress`'s arguments: the event's fields, a run id required. The agent records
    them as the event (its envelope fields, `v` `ts` `client` `slot`, are the agent's own)."""

    run_id: Name


class BenchDone(EventBase, tag="bench.done", omit_defaults=True):
    run_id: str = ""
    path: str | None = None
    state: BenchState | None = None
    ok: bool | None = None
    error: str | None = None
    exit_code: int | None = None
    # The sweep swapped the slot back to what it served before: the result's `put_back`
    # ({slot, profile, ok: true | false | null (asked, not waited for), error}).
    put_back: dict[str, Any] | None = None
    # A swap the user confirmed over the running bench stopped it: {slot, to, client, at}.
    cut: dict[str, Any] | None = None


class DiskError(EventBase, tag="disk.error"):
    """The session directory refuses writes (the recorder's own event, session/writer.py)."""

    error: str | None = None
    path: str | None = None  # the file the write failed on


class DiskOk(EventBase, tag="disk.ok"):
    """Writes succeed again: what failed, since when, and what was dropped meanwhile."""

    was: str | None = None
    since: float | None = None
    dropped_events: int = 0
    dropped_samples: int = 0


class LogRotated(EventBase, tag="log.rotated"):
    file: str = ""
    keep: int | None = None


class JobTarget(Struct, frozen=True, kw_only=True):
    """Where a batch job sends: one slot's server, or a host.toml (or fleet.toml) pool's
    endpoint, whose gateway spreads the job over the pool's slots."""

    kind: Literal["slot", "pool"]
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"


class JobEvent(EventBase, tag="job", omit_defaults=True):
    """A batch job's event (agent/jobs/jobs_host.py); `job` is its id. Jobs keep their own state in
    the agent (`job_status`), so these fold into nothing here; they are typed for readers. Each
    type sets a few of these fields: the rest (their defaults) are not written."""

    job: str = ""
    name: str | None = None
    state: str | None = None
    input: str | None = None
    output: str | None = None
    profile: str | None = None
    launch_id: str | None = None
    info_hash: str | None = None  # what the segment's server ran (server.provenance)
    total: int | None = None
    answered: int | None = None
    failed: int | None = None
    already_answered: int | None = None
    already_failed: int | None = None
    in_flight: int | None = None
    concurrency: int | None = None
    completions: int | None = None
    completions_s: float | None = None
    out_tokens: int | None = None
    in_tokens: int | None = None
    seconds: float | None = None
    tok_s: float | None = None
    concurrency_why: str | None = None
    pinned: bool | None = None
    force: bool | None = None
    restart: bool | None = None
    respawn: int | None = None
    code: int | None = None
    cut_bytes: int | None = None
    message: str | None = None
    reason: str | None = None
    why: str | None = None
    joules: float | None = None  # GPU energy (job.segment, job.done)
    target: JobTarget | None = None  # where the job sends (job.start)


# Job events carry no fields of their own: one Struct per type, named for its tag, built at
# the site that publishes it (agent/jobs/jobs_host.py, jobs/chooser.py).


class JobStart(JobEvent, tag="job.start"):
    pass


class JobChecked(JobEvent, tag="job.checked"):
    pass


class JobProgress(JobEvent, tag="job.progress"):
    pass


class JobDone(JobEvent, tag="job.done"):
    pass


class JobErrored(JobEvent, tag="job.error"):
    pass


class JobCancel(JobEvent, tag="job.cancel"):
    pass


class JobConcurrency(JobEvent, tag="job.concurrency"):
    pass


class JobHeld(JobEvent, tag="job.held"):
    pass


class JobHold(JobEvent, tag="job.hold"):
    pass


class JobPause(JobEvent, tag="job.pause"):
    pass


class JobRelease(JobEvent, tag="job.release"):
    pass


class JobRepaired(JobEvent, tag="job.repaired"):
    pass


class JobResume(JobEvent, tag="job.resume"):
    pass


class JobResumeAfterRestart(JobEvent, tag="job.resume_after_restart"):
    pass


class JobRunnerExit(JobEvent, tag="job.runner_exit"):
    pass


class JobSegmentDone(JobEvent, tag="job.segment"):
    pass


class JobSegmentStart(JobEvent, tag="job.segment.start"):
    pass


class JobSet(JobEvent, tag="job.set"):
    pass


class JobDiskError(JobEvent, tag="job.disk_error"):
    """The output cannot be written (message: "disk full: ..."); not sending."""


class JobDiskOk(JobEvent, tag="job.disk_ok"):
    pass


class JobStalled(JobEvent, tag="job.stalled"):
    """Message: "stalled: <why>"."""


class JobStallOver(JobEvent, tag="job.stall_over"):
    pass


class JobTrial(JobEvent, tag="job.trial"):
    """A --choose job's trial: a candidate swapped to, measured or skipped."""


class JobWatch(JobEvent, tag="job.watch"):
    """The rate fell more than 15% below the decision's projection for 5 minutes."""


class JobReplan(JobEvent, tag="job.replan"):
    """--replan: the trial runs again on the remaining work."""


JOB_EVENTS: Final[tuple[type[JobEvent], ...]] = (
    JobStart,
    JobChecked,
    JobProgress,
    JobDone,
    JobErrored,
    JobCancel,
    JobConcurrency,
    JobHeld,
    JobHold,
    JobPause,
    JobRelease,
    JobRepaired,
    JobResume,
    JobResumeAfterRestart,
    JobRunnerExit,
    JobSegmentDone,
    JobSegmentStart,
    JobSet,
    JobDiskError,
    JobDiskOk,
    JobStalled,
    JobStallOver,
    JobTrial,
    JobWatch,
    JobReplan,
)


class JobCandidate(Struct, kw_only=True):
    """One candidate of a --choose job (jobs/choose.py): what its trial measured and projects."""

    name: str
    state: str = "pending"  # pending | swapping | measuring | measured | skipped
    reason: str | None = None  # why skipped, or what ended its measurement
    requests: int = 0  # answers written while it was measured (kept: real work)
    out_tokens: int = 0
    tok_s: float | None = None  # output tok/s, with its 95% interval
    ci_low: float | None = None
    ci_high: float | None = None
    swap_s: float | None = None  # the swap to it, as measured in the trial
    projected_s: float | None = None  # the rest of the job on it, swap included
    joules: float = 0.0  # GPU energy while it was measured
    projected_j: float | None = None
    j_per_completion: float | None = None
    tok_per_j: float | None = None
    info_hash: str | None = None  # what its server ran (server.provenance), once measured
    delta: dict[str, Any] | None = None  # --choose auto: its flags beside the serving profile's
    gain: float | None = None  # --choose auto: advise's expected factor over the serving profile
    # the runner's warm-first pass on its server, once ended: {"primed": N, "at": completions}
    warm_first: dict[str, int] | None = None


class JobChoice(Struct, kw_only=True):
    """A --choose job's trial and decision, as `job_status` carries it (`decision`)."""

    winner: str | None = None
    phase: str = "trial"  # trial | decided
    objective: str = "time"  # time | energy
    round: int = 1  # 2 and up: --replan ran the trial again
    current: str | None = None  # the candidate being swapped to or measured
    note: str | None = None  # e.g. "the job finished during the trial"
    watch: str | None = None  # the rate has stayed >15% below the projection
    candidates: list[JobCandidate] = []
    advice: list[dict[str, Any]] = []  # --choose auto: sgltui advise's proposals, tried or not


class JobDecisionEvent(JobEvent, tag="job.decision"):
    """The trial's verdict: each candidate's tok/s with its interval, requests used, projected
    finish and energy; the winner the job continues on."""

    winner: str | None = None
    objective: str | None = None
    round: int | None = None
    note: str | None = None
    candidates: list[JobCandidate] = []
    advice: list[dict[str, Any]] = []  # --choose auto: the proposals, for the report's "why"


class OtherEvent(EventBase, tag="other"):
    """An event type this version does not know (a newer agent, an older session): kept as
    recorded (`raw`), folded into nothing."""

    name: str = ""
    raw: dict[str, Any] = {}


Event: TypeAlias = (
    AgentStart
    | AgentAdopt
    | AgentStop
    | Command
    | CommandRefused
    | PoolRoll
    | GatewayStart
    | GatewayDied
    | GatewayRestarted
    | GatewayFailed
    | GatewayStopped
    | PoolWorkerChanged
    | SlotExposed
    | SlotAttached
    | ServerProvenance
    | PreflightDone
    | Launch
    | SlotStateChanged
    | SlotPhase
    | SlotDrain
    | SlotRestart
    | SwapStep
    | SwapDone
    | SwapFailure
    | FrontHold
    | FrontRoute
    | FrontRelease
    | EndpointEvent
    | Capacity
    | BenchStart
    | BenchProgress
    | BenchDone
    | DiskError
    | DiskOk
    | LogRotated
    | OtherEvent
)

_EVENT_TYPES: tuple[type[EventBase], ...] = (
    AgentStart,
    AgentAdopt,
    AgentStop,
    Command,
    CommandRefused,
    PoolRoll,
    GatewayStart,
    GatewayDied,
    GatewayRestarted,
    GatewayFailed,
    GatewayStopped,
    PoolWorkerChanged,
    SlotExposed,
    SlotAttached,
    ServerProvenance,
    PreflightDone,
    ProfileChanged,
    Launch,
    SlotStateChanged,
    SlotPhase,
    SlotDrain,
    SlotRestart,
    SwapStep,
    SwapDone,
    SwapFailure,
    FrontHold,
    FrontRoute,
    FrontRelease,
    EndpointEvent,
    Capacity,
    BenchStart,
    BenchProgress,
    BenchDone,
    DiskError,
    DiskOk,
    LogRotated,
    *JOB_EVENTS,
    JobDecisionEvent,
)
EVENT_TYPES: Final[Mapping[str, type[EventBase]]] = {
    str(t.__struct_config__.tag): t for t in _EVENT_TYPES
}


def decode_event(data: Mapping[str, Any]) -> EventBase:
    """A recorded or pushed event (a dict) -> its Struct. Lenient, because sessions outlive
    versions: an unknown type or a field of the wrong type gives an OtherEvent, never an error."""
    name = data.get("type")
    raw_ts = data.get("ts")
    ts = float(raw_ts) if isinstance(raw_ts, (int, float)) and not isinstance(raw_ts, bool) else 0.0
    client = data.get("client") if isinstance(data.get("client"), str) else None
    slot = str(data["slot"]) if data.get("slot") is not None else None
    cls = EVENT_TYPES.get(name) if isinstance(name, str) else None
    if cls is not None:
        try:
            return msgspec.convert(
                {**data, "ts": ts, "client": client, "slot": slot}, cls, strict=False
            )
        except msgspec.ValidationError:
            pass
    return OtherEvent(ts=ts, client=client, slot=slot, name=str(name), raw=dict(data))


def event_dict(event: EventBase) -> dict[str, Any]:
    """An event as recorded and pushed (a dict with its "type")."""
    if isinstance(event, OtherEvent):
        return dict(event.raw)
    out: dict[str, Any] = msgspec.to_builtins(event)
    # the envelope is always there, even where an event leaves out its defaults (omit_defaults)
    for name in EventBase.__struct_fields__:
        out.setdefault(name, getattr(event, name))
    return out
