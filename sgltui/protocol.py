"""The agent's wire protocol and the one reducer of its event stream (stdlib + msgspec only).

Everything that crosses the agent's unix socket is defined here, and encoded and decoded here:

- a request is one JSON object a line, ``{"id", "op", "args", "client"}``; ``OPS`` is the one
  list of ops, each with the Struct its arguments must match (so a wrong type is one clear error,
  never a traceback deep in the agent) and whether it only reads;
- a reply is ``{"id", "ok", "result"}`` or ``{"id", "ok": false, "error"}``, the error an
  ``Error`` (a code from ``ErrorCode``, the message, the fix): clients act on the code, never on
  the words (before a hello agrees it is the bare line, which every version reads);
- a push is ``{"push": "event" | "sample" | "log", "data"}``;
- an event (what the agent records in ``events.jsonl`` and pushes) is one Struct per ``type``.

A client opens with ``hello``: agent and client of different versions refuse each other with one
line that says which versions and how to restart the agent (``version_mismatch``).

``apply(state, event) -> state`` is the only fold of the event stream: the TUI model, replay,
report and ``status`` all use it, so that they cannot disagree about what an event means.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, TypeAlias, get_args

import msgspec
from msgspec import Meta, Struct, field

from sgltui import __version__

# Bumped whenever a message changes shape; a client and an agent of different protocol (or
# package) versions refuse to talk (see `version_mismatch`).
PROTOCOL_VERSION: Final = 3  # 3: a reply's error is an Error (code, message, fix)
# Schema version of recorded events (the "v" of each events.jsonl line).
EVENT_SCHEMA: Final = 1

MAX_CLIENT_NAME: Final = 120

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)


class SlotState(StrEnum):
    STOPPED = "stopped"
    LAUNCHING = "launching"
    READY = "ready"
    DRAINING = "draining"
    STOPPING = "stopping"
    FAILED = "failed"
    CRASHED = "crashed"


class CauseKind(StrEnum):
    """Why a server failed (sgltui/core/causes.py); `Cause.kind` holds one of these."""

    OOM = "oom"
    PORT = "port"
    FLAG = "flag"
    MODEL = "model"
    CUDA = "cuda"
    EXIT = "exit"
    HANG = "hang"
    SIGNAL = "signal"
    PREFLIGHT = "preflight"
    IMPORT = "import"  # SGLang (or a module it needs) missing from the server's interpreter


class Drain(StrEnum):
    WAIT = "wait"
    FORCE = "force"


class BenchState(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"


class JobState(StrEnum):
    """A batch job's state (agent/jobs_host.py): the first four are active."""

    CHECKING = "checking"
    WAITING = "waiting"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


class ProtocolError(Exception):
    """A message that does not follow the protocol: one line for the peer."""


# ---- op arguments ------------------------------------------------------------------------------
# Unknown argument names are refused (a typo must not be silently ignored).

NonNegative = Annotated[float, Meta(ge=0)]
SlotId = Annotated[str, Meta(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_-]+$")]
Name = Annotated[str, Meta(min_length=1, max_length=4096)]
Dirs = list[Annotated[str, Meta(min_length=1, max_length=4096)]]


class Args(Struct, forbid_unknown_fields=True, kw_only=True):
    """Arguments of an op without any."""


class SlotArgs(Args):
    """An op on one slot: by name; none means the agent's only slot (with several, the
    refusal lists them)."""

    slot: SlotId | None = None
    # A pool of slots (host.toml's [[pool]]): the op applies to each of its slots (a swap rolls
    # one slot at a time). None: the slot alone.
    pool: SlotId | None = None


class HelloArgs(Args):
    version: str = ""
    protocol: int = 0


class ProfilesArgs(Args):
    profiles_dirs: Dirs = []


class LogsArgs(SlotArgs):
    lines: Annotated[int, Meta(ge=0, le=100_000)] = 200
    launch_id: Annotated[str, Meta(pattern=r"^[A-Za-z0-9._-]+$", max_length=255)] | None = None


class TimelineArgs(Args):
    series: list[Annotated[str, Meta(max_length=255)]] | Name | None = None
    since: float | None = None


# The profile is checked by the agent (its message says how to list profiles).
ProfileName = Annotated[str, Meta(max_length=4096)]
# Preflight checks to skip (`--force CHECK`); the agent knows their names (agent/preflight.py).
CheckName = Annotated[str, Meta(max_length=64)]
Force = list[CheckName] | CheckName


class LaunchArgs(SlotArgs):
    """What every op that may launch a profile takes: where to find it, checks to skip."""

    profiles_dirs: Dirs = []
    force: Force = []


class PreflightArgs(LaunchArgs):
    profile: ProfileName = ""


class StartArgs(PreflightArgs):
    wait: bool = False


class StopArgs(SlotArgs):
    drain: Drain = Drain.WAIT
    timeout: NonNegative = 30.0
    wait: bool = False


class RestartArgs(LaunchArgs):
    drain: Drain = Drain.WAIT
    wait: bool = False
    confirm: bool = False  # a pinned batch job on the slot asks first


class SwapArgs(StartArgs):
    rollback: bool = True
    drain: Drain = Drain.WAIT
    confirm: bool = False  # a pinned batch job on the slot asks first


class ShutdownArgs(Args):
    stop_servers: bool = False


class StandbyArgs(LaunchArgs):
    """standby add / remove: a profile kept warm (asleep) beside a slot's server."""

    profile: ProfileName = ""
    wait: bool = False


class BenchSpec(Struct, forbid_unknown_fields=True, kw_only=True):
    """What a bench run measures, declared once: bench/spec.py's BenchSpec subclasses it with the
    runner's checks (protocol.py cannot import the bench). Unknown names are refused, as in
    the args."""

    profiles: list[str] = []  # empty: whatever slot `slot` serves now
    slot: str = "0"
    concurrency: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    input_len: int = 1024
    output_len: int = 1024
    requests: int | None = None
    duration: float | None = None
    repeat: int = 1
    workload: str = "random"
    api: str = "completions"
    url: str | None = None  # bench this server directly, no agent, no swaps
    warmup: int | None = None  # default: the concurrency
    seed: int = 42
    ignore_eos: bool = True
    flush_cache: bool = True
    job_completions: int | None = None
    job_output_len: int | None = None
    profiles_dirs: list[str] = []
    ready_timeout: float = 1800.0


class BenchStartArgs(Args):
    spec: BenchSpec


class BenchStopArgs(Args):
    run_id: Name


class DemoLoadArgs(Args):
    on: bool = True


JobRef = Annotated[str, Meta(max_length=255)] | None
# A number, or its text as the CLI passes it, or "auto"; the jobs host checks the range.
Concurrency = int | Annotated[str, Meta(pattern=r"^(auto|[0-9]{1,7})$")]


class JobRunArgs(SlotArgs):
    input: Annotated[str, Meta(max_length=4096)] = ""
    output: Annotated[str, Meta(max_length=4096)] | None = None
    concurrency: Concurrency | None = "auto"
    name: Annotated[str, Meta(max_length=255)] | None = None
    pinned: bool = False
    # --choose A,B,C: a trial on the job's own requests picks the profile (jobs/choose.py)
    choose: Annotated[str, Meta(max_length=4096)] | None = None
    objective: Literal["time", "energy"] = "time"
    replan: bool = False
    trial_requests: Annotated[int, Meta(ge=1)] | None = None
    trial_minutes: Annotated[float, Meta(gt=0)] | None = None


class JobArgs(Args):
    job: JobRef = None


class ExposeArgs(SlotArgs):
    """Serve a slot to a gateway on another host (a fleet.toml [[pool]]): its server listens on
    `address` and requires an API key the agent generates and keeps (0600). None: back to
    loopback without a key. Takes effect at the slot's next launch (start, restart, swap)."""

    address: Annotated[str, Meta(min_length=1, max_length=255)] | None = None


class AttachArgs(SlotArgs, kw_only=True):
    """Watch a server sgltui did not start (agent/attach.py): `url`, with its key if it needs
    one. `slot`: the slot it becomes (None: the only slot when idle, else ext-PORT)."""

    url: Annotated[str, Meta(min_length=1, max_length=512, pattern=r"^https?://")]
    api_key: Annotated[str, Meta(max_length=4096)] | None = None


class AdoptArgs(SlotArgs):
    """Take over an attached server: its effective configuration becomes profile `name`
    (None: ext-PORT) in the agent's profile folder; swap and stop then treat it as launched."""

    name: Annotated[str, Meta(min_length=1, max_length=64)] | None = None


class RemoteWorker(Struct, forbid_unknown_fields=True, kw_only=True):
    """A server of another host behind this host's gateway (what ExposeArgs gave out)."""

    name: Annotated[str, Meta(min_length=1, max_length=128)]  # host/slot
    url: Annotated[str, Meta(min_length=1, max_length=512, pattern=r"^https?://")]
    api_key: Annotated[str, Meta(max_length=512)] | None = None
    # What it runs, as its host said (Exposed.profile): the pool's jobs label their segments
    # with what the workers they were sent to run.
    profile: Annotated[str, Meta(max_length=128)] | None = None


class RemotePoolArgs(Args):
    """A pool whose workers this agent's gateway (smg) routes to, wherever they run: the fleet
    side sets its whole worker list; the agent adds what is new and removes what is gone (one
    it would leave with no routable worker is refused). `drop`: end the gateway."""

    pool: SlotId
    port: Annotated[int, Meta(ge=1, le=65535)]
    host: Annotated[str, Meta(min_length=1, max_length=255)] = "127.0.0.1"
    policy: Annotated[str, Meta(max_length=32)] | None = None
    workers: list[RemoteWorker] = []
    wait: NonNegative = 0.0  # seconds to wait for every listed worker to be ready (0: none)
    drop: bool = False


class JobSetArgs(Args):
    """Only what is given changes (UNSET fields are left out of the handler's dict)."""

    job: JobRef = None
    concurrency: Concurrency | msgspec.UnsetType = msgspec.UNSET
    pinned: bool | msgspec.UnsetType = msgspec.UNSET


# ---- envelopes ---------------------------------------------------------------------------------

RequestId: TypeAlias = int | str | None


class Request(Struct, kw_only=True):
    op: str
    id: RequestId = None
    args: dict[str, Any] | None = None
    client: str | None = None


# What kind of refusal or failure an error is; a client acts on this, never on the message.
ErrorCode: TypeAlias = Literal[
    "busy",  # another command holds the slot or pool now: wait and ask again
    "pinned",  # a batch job pinned to the slot: confirm (`--yes`) to go ahead
    "already",  # it is so already (the slot runs that profile, it is stopped)
    "refused",  # a check refused it (preflight, the profile, the slot's state): the fix says what
    "not_found",  # no such profile, slot, pool, job, run or log
    "invalid",  # the request itself is wrong (unknown op, bad arguments, not JSON)
    "unavailable",  # the agent or a host cannot be reached, or what it needs is not up
    "internal",  # a bug in the agent: its log has the traceback
    "version",  # the client and the agent are of different versions
]
ERROR_CODES: Final[tuple[str, ...]] = get_args(ErrorCode)


class Error(Struct, kw_only=True, omit_defaults=True):
    """A refused or failed op: `code` for the program, `message` and `fix` for the person."""

    code: ErrorCode
    message: str
    fix: str | None = None

    def line(self) -> str:
        """The one line a person reads: what is wrong; what to do."""
        return f"{self.message}; {self.fix}" if self.fix else self.message


class Reply(Struct, kw_only=True, omit_defaults=True):
    id: RequestId
    ok: bool
    result: Any = None
    # An Error once a hello agreed; before that the bare line (a client of another version
    # reads it, and a refused hello is how it learns of the mismatch).
    error: Error | str | None = None


class Push(Struct, kw_only=True):
    push: Literal["event", "sample", "log"]
    data: Any


class LogLines(Struct, kw_only=True):
    slot: str
    launch_id: str | None = None
    lines: list[str] = []


_encoder = msgspec.json.Encoder(enc_hook=str)  # paths and the like go out as their text


def encode(msg: Reply | Push | Request | Mapping[str, Any]) -> bytes:
    """One message as one line (newline included)."""
    return _encoder.encode(msg) + b"\n"


def decode_request(raw: bytes) -> Request:
    """A request line -> Request (the op's arguments still a dict: see `parse_args`)."""
    try:
        req = msgspec.json.decode(raw, type=Request)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"bad request: {exc}") from None
    except RecursionError:  # the decoder's own depth guard: a 100k-deep document
        raise ProtocolError("bad request: JSON nested too deeply") from None
    except msgspec.DecodeError:
        raise ProtocolError(
            'bad request: one JSON object per line expected, like {"id": 1, "op": "status"}'
        ) from None
    if req.client is not None:
        req.client = req.client[:MAX_CLIENT_NAME]
    return req


def parse_args(op: str, args: Mapping[str, Any] | None) -> Args:
    """The op's arguments checked against its Struct; a ProtocolError names the first problem."""
    spec = OPS.get(op)
    if spec is None:
        raise ProtocolError(f"unknown op {op!r}; this agent knows: {', '.join(sorted(OPS))}")
    try:
        return msgspec.convert(args or {}, spec.args)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"bad arguments for {op}: {_explain(spec.args, exc)}") from None


def _explain(args_type: type[Args], exc: msgspec.ValidationError) -> str:
    """msgspec's "Expected `bool`, got `str` - at `$.on`" as "on: expected `bool`, got `str`",
    with the choices when the argument is one of a few words."""
    text = str(exc)
    msg, sep, where = text.rpartition(" - at `$.")
    if not sep:
        return text
    name = where.rstrip("`").split(".")[0].split("[")[0]
    hint = ""
    ftype = {f.name: f.type for f in msgspec.structs.fields(args_type)}.get(name)
    if isinstance(ftype, type) and issubclass(ftype, enum.Enum):
        hint = " (one of: " + ", ".join(str(m.value) for m in ftype) + ")"
    return f"{where.rstrip('`')}: {msg[:1].lower()}{msg[1:]}{hint}"


def args_dict(args: Args) -> dict[str, Any]:
    """Checked arguments as the dict the agent's handlers take (defaults filled in)."""
    out = {f: getattr(args, f) for f in args.__struct_fields__}
    return {
        k: (str(v) if isinstance(v, StrEnum) else v)
        for k, v in out.items()
        if v is not msgspec.UNSET
    }


def decode_message(raw: bytes) -> Reply | Push:
    """A line from the agent (client side)."""
    try:
        obj = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        raise ProtocolError("the agent sent a line that is not JSON") from None
    if not isinstance(obj, dict):
        raise ProtocolError("the agent sent a line that is not a JSON object")
    try:
        if "push" in obj:
            return msgspec.convert(obj, Push)
        return msgspec.convert(obj, Reply)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"the agent sent a malformed message: {exc}") from None


def version_mismatch(
    agent_version: str,
    agent_protocol: int,
    client_version: str = __version__,
    client_protocol: int = PROTOCOL_VERSION,
) -> str | None:
    """The one line a client and an agent of different versions get, or None when they match."""
    if agent_version == client_version and agent_protocol == client_protocol:
        return None
    return (
        f"the agent runs sgltui {agent_version or '(unknown)'} (protocol {agent_protocol}), "
        f"this is sgltui {client_version or '(unknown)'} (protocol {client_protocol}): "
        f"restart the agent with `sgltui agent stop` (its servers keep running), "
        f"then `sgltui agent start` (or `sgltui`) starts this version's, which re-adopts them"
    )


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
    pool: str | None = None  # an op on a host.toml pool's slots (agent/pools.py)


class CommandRefused(EventBase, tag="command.refused"):
    op: str = ""
    reason: str = ""


class PoolEvent(EventBase):
    """An event of a host.toml pool (agent/pools.py) or its gateway (agent/gateway.py)."""

    pool: str = ""


class PoolRoll(PoolEvent, tag="pool.roll", omit_defaults=True):
    """A rolling swap's steps: begin, removed, drained, done (a slot), stopped, end."""

    step: str = ""
    profile: str | None = None
    drained: bool | None = None
    left: int | None = None
    error: str | None = None


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
    # mended it (agent/reconcile.py): what was wrong
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
    """The restart policy (agent/restart_policy.py) after a crash: relaunching, or giving up."""

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
    kind: Literal["warm", "cold"] = "cold"  # warm: a standby woken (agent/standby.py)


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


class Capacity(EventBase, tag="capacity"):
    launch_id: str | None = None
    card: dict[str, Any] | None = None


class BenchStart(EventBase, tag="bench.start"):
    run_id: str = ""
    spec: dict[str, Any] = {}
    pid: int | None = None


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


class JobEvent(EventBase, tag="job", omit_defaults=True):
    """A batch job's event (agent/jobs_host.py); `job` is its id. Jobs keep their own state in
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


# Job events carry no fields of their own: one Struct per type, named for its tag, built at
# the site that publishes it (agent/jobs_host.py, jobs/chooser.py).


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


class JobDecisionEvent(JobEvent, tag="job.decision"):
    """The trial's verdict: each candidate's tok/s with its interval, requests used, projected
    finish and energy; the winner the job continues on."""

    winner: str | None = None
    objective: str | None = None
    round: int | None = None
    note: str | None = None
    candidates: list[JobCandidate] = []


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
    """The slot's stable front endpoint (sgltui/agent/front.py). Counts are since the agent
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
    kind: Literal["warm", "cold"] = "cold"  # warm: a standby was woken (agent/standby.py)
    seconds: float | None = None  # keystroke (accepted) to serving


class ResolvedView(Struct, kw_only=True):
    """A profile as resolved when its command was accepted (agent/resolved.py
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
    resolved: ResolvedView | None = None  # the resolved profile it runs (agent/resolved.py)
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


# ---- the session's history (the report's launches, swaps and failures) -------------------------

LaunchOutcome = Literal["launching", "ready", "failed", "crashed", "stopped before ready"]


class LaunchRecord(Struct, kw_only=True):
    """One server launch and how it went: ready (and when), failed or crashed (and why)."""

    launch_id: str | None = None
    slot: str
    profile: str | None = None
    ts: float
    command: list[str] = []
    command_hash: str | None = None
    outcome: LaunchOutcome = "launching"
    ready_at: float | None = None
    ended: float | None = None
    cause: str | None = None  # the cause's summary, or the state's reason
    max_running_requests: int | None = None


class SwapRecord(Struct, kw_only=True, rename={"from_": "from"}):
    """One swap from its first step to its swap.done (done_at None while it runs). `steps` and
    `phases` are what the slot went through, for swaps whose swap.done carries no timings."""

    slot: str
    from_: str | None = None
    to: str | None = None
    steps: list[tuple[float, str]] = []  # swap.step names, and "ready" when the slot got there
    phases: list[tuple[float, str]] = []  # slot.phase values during the swap
    done_at: float | None = None
    ok: bool = False
    rolled_back: bool = False
    aborted: bool = False
    timings_s: dict[str, float | None] = {}


class FailureRecord(Struct, kw_only=True):
    """A slot that went to failed or crashed, with the launch it was running."""

    ts: float
    slot: str
    state: SlotState
    profile: str | None = None
    launch_id: str | None = None
    cause: Cause | None = None
    reason: str | None = None


class SessionState(Struct, kw_only=True, frozen=True):
    """What the events up to some point say. Treated as immutable: `apply` returns a new state
    that shares every part the event did not change (cheap checkpoints for replay)."""

    agent: AgentView = field(default_factory=AgentView)
    slots: dict[str, SlotView] = {}
    profiles: dict[str, ProfileSeen] = {}
    bench: dict[str, BenchView] = {}
    disk: DiskView = field(default_factory=DiskView)
    launches: tuple[LaunchRecord, ...] = ()
    swaps: tuple[SwapRecord, ...] = ()
    failures: tuple[FailureRecord, ...] = ()


# The name of the --config file that carries a launch's API key (core/launch_secrets.py, where a
# test checks that both say the same): a key in a launch, without the key in the argv.
SECRETS_FILE_PREFIX: Final = "sglang-secrets-"

_ENDED = (SlotState.STOPPED, SlotState.FAILED, SlotState.CRASHED)
_CLEARS_CAUSE = (SlotState.LAUNCHING, SlotState.READY, SlotState.STOPPED)


def _flag(argv: list[str], name: str) -> str | None:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def _with_profiles(state: SessionState, *names: str | None) -> dict[str, ProfileSeen]:
    new = [n for n in names if n and n not in state.profiles]
    if not new:
        return state.profiles
    return {**state.profiles, **{n: ProfileSeen(name=n) for n in new}}


def _slot_event(slot: SlotView, ev: EventBase) -> SlotView:
    """The slot after one of its events (the same object when the event changes nothing)."""
    r = msgspec.structs.replace
    if isinstance(ev, Launch):
        port = ev.port
        if port is None:
            text = _flag(ev.command, "--port")
            port = int(text) if text and text.isdigit() else 30000
        return r(
            slot,
            profile=ev.profile,
            launch_id=ev.launch_id,
            command=list(ev.command),
            command_hash=ev.command_hash,
            log_path=ev.log_path,
            started_at=ev.ts,
            ready_at=None,
            pid=ev.pid,
            pids=[ev.pid] if ev.pid else [],
            capacity=None,
            cause=None,
            host=ev.host or _flag(ev.command, "--host") or "127.0.0.1",
            port=port,
            api_key_set=ev.api_key_set
            if ev.api_key_set is not None
            else _flag(ev.command, "--api-key") is not None
            or SECRETS_FILE_PREFIX in (_flag(ev.command, "--config") or ""),
        )
    if isinstance(ev, SlotStateChanged):
        state = ev.state or slot.state
        changes: dict[str, Any] = {"state": state, "phase": ev.phase}
        if ev.profile:
            changes["profile"] = ev.profile
        if ev.launch_id:
            changes["launch_id"] = ev.launch_id
        # As the agent's slot does: a state without a cause clears it only when it starts over.
        if ev.cause is not None or state in _CLEARS_CAUSE:
            changes["cause"] = ev.cause
        if state == SlotState.READY:
            changes["ready_at"] = ev.ts
        if state != SlotState.LAUNCHING:  # progress is a launch's (agent/slot.py _estimate)
            changes.update(progress=None, eta_s=None)
        if state in _ENDED:  # a failed server's pid stays on show (what died), as the agent's
            changes["pids"] = []
            if state == SlotState.STOPPED:
                changes["pid"] = None
        return r(slot, **changes)
    if isinstance(ev, SlotPhase):
        return r(slot, phase=ev.phase, progress=ev.progress, eta_s=ev.eta_s)
    if isinstance(ev, SwapStep):
        started = slot.swap.started_at if slot.swap else None
        if started is None and ev.ts:
            started = ev.ts - (ev.elapsed_s or 0.0)
        swap = SwapView(
            from_=ev.from_, to=ev.to, step=ev.step, started_at=started, elapsed_s=ev.elapsed_s
        )
        return r(slot, swap=swap)
    if isinstance(ev, SwapFailure):  # the new profile's failure; swap.done follows
        pending = LastSwap(from_=ev.from_, to=ev.to, cause=ev.cause, client=ev.client)
        return r(slot, last_swap=pending)
    if isinstance(ev, SwapDone):
        if ev.aborted:  # a stop cut the swap short: the agent keeps the previous last_swap
            return r(slot, swap=None) if slot.swap is not None else slot
        prev = slot.last_swap
        failure = prev.cause if prev and prev.finished_at is None and prev.to == ev.to else None
        done = LastSwap(
            from_=ev.from_,
            to=ev.to,
            ok=ev.ok,
            rolled_back=ev.rolled_back,
            timings_s=dict(ev.timings_s),
            cause=None if ev.ok else (failure or slot.cause),
            finished_at=ev.ts,
            client=ev.client,
            kind=ev.kind,
            seconds=ev.timings_s.get("total"),
        )
        return r(slot, swap=None, last_swap=done)
    if isinstance(ev, (FrontHold, FrontRoute, FrontRelease)):
        front = slot.front or FrontView()
        if isinstance(ev, FrontHold):
            front = r(front, state="holding")
        elif isinstance(ev, FrontRoute):
            front = r(front, state="routing", backend=ev.backend)
        else:
            front = r(front, state="no server", backend=None)
        return r(slot, front=front)
    if isinstance(ev, Capacity):
        return r(slot, capacity=capacity_card(ev.card))
    if isinstance(ev, AgentAdopt):
        if not ev.profile:
            return slot
        changes = {"profile": ev.profile, "launch_id": ev.launch_id or slot.launch_id}
        if ev.ok and ev.state:
            changes["state"] = ev.state
        return r(slot, **changes)
    return slot


def _bench_event(state: SessionState, ev: EventBase) -> dict[str, BenchView]:
    r = msgspec.structs.replace
    if isinstance(ev, BenchStart) and ev.run_id:
        return {**state.bench, ev.run_id: BenchView(run_id=ev.run_id, started=ev.ts)}
    if isinstance(ev, BenchProgress) and ev.run_id:
        run = state.bench.get(ev.run_id) or BenchView(run_id=ev.run_id)
        return {**state.bench, ev.run_id: r(run, progress=bench_progress_view(ev))}
    if isinstance(ev, BenchDone) and ev.run_id:
        run = state.bench.get(ev.run_id) or BenchView(run_id=ev.run_id)
        done = ev.state or (BenchState.FAILED if ev.ok is False or ev.error else BenchState.DONE)
        return {**state.bench, ev.run_id: r(run, state=done, path=ev.path)}
    return state.bench


def _last(records: tuple[Any, ...], match: Any) -> int:
    """Index of the latest record `match` accepts, or -1 (the open one is near the end)."""
    for i in range(len(records) - 1, -1, -1):
        if match(records[i]):
            return i
    return -1


def _put(records: tuple[Any, ...], i: int, record: Any) -> tuple[Any, ...]:
    return (*records[:i], record, *records[i + 1 :])


def _history(state: SessionState, slot: SlotView, ev: EventBase) -> dict[str, Any]:
    """What a slot event adds to the session's history (the state's fields it replaces)."""
    r = msgspec.structs.replace
    if isinstance(ev, Launch):
        launch = LaunchRecord(
            launch_id=ev.launch_id,
            slot=slot.id,
            profile=ev.profile,
            ts=ev.ts,
            command=list(ev.command),
            command_hash=ev.command_hash,
        )
        return {"launches": (*state.launches, launch)}
    if isinstance(ev, Capacity):
        i = _last(state.launches, lambda x: x.launch_id == ev.launch_id)
        mrr = (ev.card or {}).get("max_running_requests")
        if i < 0:
            return {}
        return {"launches": _put(state.launches, i, r(state.launches[i], max_running_requests=mrr))}
    out: dict[str, Any] = {}
    swap_i = -1
    if slot.swap is not None or isinstance(ev, SwapDone):
        swap_i = _last(state.swaps, lambda x: x.slot == slot.id and x.done_at is None)
    if isinstance(ev, SwapStep):
        if swap_i < 0:
            rec = SwapRecord(slot=slot.id, from_=ev.from_, to=ev.to, steps=[(ev.ts, ev.step)])
            out["swaps"] = (*state.swaps, rec)
        else:
            cur = state.swaps[swap_i]
            rec = r(cur, to=ev.to or cur.to, steps=[*cur.steps, (ev.ts, ev.step)])
            out["swaps"] = _put(state.swaps, swap_i, rec)
    elif isinstance(ev, SlotPhase) and swap_i >= 0 and ev.phase:
        cur = state.swaps[swap_i]
        out["swaps"] = _put(state.swaps, swap_i, r(cur, phases=[*cur.phases, (ev.ts, ev.phase)]))
    elif isinstance(ev, SwapDone):
        done: dict[str, Any] = {
            "from_": ev.from_,
            "to": ev.to,
            "done_at": ev.ts,
            "ok": ev.ok,
            "rolled_back": ev.rolled_back,
            "aborted": ev.aborted,
            "timings_s": dict(ev.timings_s),
        }
        if swap_i < 0:
            out["swaps"] = (*state.swaps, SwapRecord(slot=slot.id, **done))
        else:
            out["swaps"] = _put(state.swaps, swap_i, r(state.swaps[swap_i], **done))
    elif isinstance(ev, SlotStateChanged) and ev.state is not None:
        if ev.state == SlotState.READY and swap_i >= 0:
            cur = state.swaps[swap_i]
            out["swaps"] = _put(state.swaps, swap_i, r(cur, steps=[*cur.steps, (ev.ts, "ready")]))
        li = _last(state.launches, lambda x: x.slot == slot.id)
        last = state.launches[li] if li >= 0 else None
        if ev.state in (SlotState.FAILED, SlotState.CRASHED):
            failure = FailureRecord(
                ts=ev.ts,
                slot=slot.id,
                state=ev.state,
                profile=ev.profile or (last.profile if last else None),
                launch_id=last.launch_id if last else None,
                cause=ev.cause,
                reason=ev.reason,
            )
            out["failures"] = (*state.failures, failure)
        changed = _launch_outcome(last, ev) if last else None
        if changed is not None:
            out["launches"] = _put(state.launches, li, changed)
    return out


def _launch_outcome(launch: LaunchRecord, ev: SlotStateChanged) -> LaunchRecord | None:
    """The slot's latest launch after a state change (None when it is unchanged)."""
    r = msgspec.structs.replace
    if ev.state == SlotState.READY and launch.ready_at is None:
        return r(launch, ready_at=ev.ts, outcome="ready")
    if ev.state in (SlotState.FAILED, SlotState.CRASHED):
        summary = (ev.cause.summary if ev.cause else "") or ev.reason
        outcome: LaunchOutcome = "failed" if ev.state == SlotState.FAILED else "crashed"
        return r(launch, outcome=outcome, cause=summary, ended=ev.ts)
    if ev.state == SlotState.STOPPED and launch.ended is None:
        outcome = "stopped before ready" if launch.outcome == "launching" else launch.outcome
        return r(launch, ended=ev.ts, outcome=outcome)
    return None


def apply(state: SessionState, ev: EventBase) -> SessionState:
    """The state after one event. Pure: `state` is not changed."""
    r = msgspec.structs.replace
    if isinstance(ev, AgentStart):
        agent = AgentView(
            pid=ev.pid if ev.pid is not None else state.agent.pid,
            version=ev.version if ev.version is not None else state.agent.version,
            started=ev.ts,
        )
        return r(state, agent=agent)
    if isinstance(ev, DiskError):
        return r(state, disk=DiskView(ok=False, error=ev.error))
    if isinstance(ev, DiskOk):
        return r(state, disk=DiskView())
    if isinstance(ev, (BenchStart, BenchProgress, BenchDone)):
        return r(state, bench=_bench_event(state, ev))
    if ev.slot is None or isinstance(ev, (Command, CommandRefused, OtherEvent)):
        return state
    slot = state.slots.get(ev.slot) or SlotView(id=ev.slot)
    history = _history(state, slot, ev)
    new = _slot_event(slot, ev)
    if new is slot and ev.slot in state.slots and not history:
        return state
    profiles = state.profiles
    if isinstance(ev, Launch):
        profiles = _with_profiles(state, ev.profile)
        seen = profiles.get(ev.profile or "")
        if seen is not None and seen.launcher is None:
            # The launch's argv says which launcher ran it: the simulator is `-m sgltui.sim`.
            launcher = "sim" if "sgltui.sim" in ev.command else "sglang"
            profiles = {**profiles, seen.name: msgspec.structs.replace(seen, launcher=launcher)}
    elif isinstance(ev, SwapStep):
        profiles = _with_profiles(state, ev.from_, ev.to)
    return r(state, slots={**state.slots, ev.slot: new}, profiles=profiles, **history)


def fold(events: Any, state: SessionState | None = None) -> SessionState:
    """`apply` over an iterable of events (Structs or recorded dicts)."""
    state = state or SessionState()
    for ev in events:
        state = apply(state, ev if isinstance(ev, EventBase) else decode_event(ev))
    return state


def slot_from_status(data: Mapping[str, Any]) -> SlotView:
    """A slot of a live STATUS as a SlotView: unknown keys ignored, and a value this version
    cannot read (a newer agent's) left at its default rather than losing the whole slot."""
    try:
        return msgspec.convert(data, SlotView, strict=False)
    except msgspec.ValidationError:
        pass
    good: dict[str, Any] = {"id": str(data.get("id", "0"))}
    for name in SlotView.__struct_fields__:
        if name in data and name != "id":
            try:
                msgspec.convert({**good, name: data[name]}, SlotView, strict=False)
                good[name] = data[name]
            except msgspec.ValidationError:
                continue
    return msgspec.convert(good, SlotView, strict=False)


def slot_dict(slot: SlotView) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(slot)
    return out


def apply_to_status_slot(data: dict[str, Any], ev: EventBase) -> bool:
    """Fold one event into a live STATUS slot (a dict, changed in place): only the fields the
    event changed are written, so keys this version does not know are kept. True if any."""
    before = slot_from_status(data)
    after = _slot_event(before, ev)
    if after is before:
        return False
    new = slot_dict(after)
    changed = False
    for name in SlotView.__struct_fields__:
        if getattr(before, name) != getattr(after, name):
            data[name] = new[name]
            changed = True
    return changed


def to_builtins(obj: Any) -> Any:
    """Structs -> plain JSON-able values (what dict-reading code and the wire take)."""
    return msgspec.to_builtins(obj, enc_hook=str)


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
    host_bytes: int = 0
    gpu_bytes: int = 0
    port: int | None = None
    pid: int | None = None
    accept_length: float | None = None  # the draft's, last measured (MTP profiles)


class ExternalView(Struct, kw_only=True):
    """A slot's server that sgltui did not start (agent/attach.py): watched, never stopped."""

    url: str
    pid: int | None = None  # None: a remote URL (no lifecycle, no GPU)
    model: str | None = None
    version: str | None = None
    attached_at: float | None = None
    info_hash: str | None = None


class Unmanaged(Struct, kw_only=True):
    """An SGLang server of this user on this host that the agent did not start
    (agent/discovery.py); `url` None while it does not listen yet."""

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
    # a ready server that does not answer (SIGSTOP, a wedge), and why (agent/liveness.py)
    unresponsive: str | None = None
    drain: DrainView | None = None  # while a stop waits for requests in flight
    gpus: list[int] = []  # the GPUs host.toml gives the slot (empty: not placed)
    standbys: list[StandbyView] = []  # profiles kept warm beside its server (agent/standby.py)


class PoolGateway(Struct, kw_only=True):
    """The process in front of a pool's workers (smg for 2+ slots, the agent's front for one)."""

    pid: int | None = None
    state: str = ""


class PoolWorker(Struct, kw_only=True):
    slot: str
    url: str | None = None
    gateway_status: str | None = None  # what the gateway says of this worker (ready, removed...)


class RollView(Struct, kw_only=True):
    """A pool's latest rolling swap (agent/pools.py keeps it as this, and changes it as it goes)."""

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
    # A fleet.toml pool whose gateway runs on this host (agent/remote_pools.py): its `slots`
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


class BenchStarted(Struct, kw_only=True):
    run_id: str


class Noted(Struct, kw_only=True):
    """`bench_progress`: the progress was recorded."""

    ok: bool


class DemoLoadReply(Struct, kw_only=True):
    on: bool


class PreflightCheck(Struct, kw_only=True):
    """One check a launch would run (agent/preflight.py)."""

    name: str
    ok: bool
    message: str
    fix: str = ""
    skipped: bool = False  # --force named it


class PreflightReply(Struct, kw_only=True):
    profile: str
    launcher: str | None = None
    ok: bool
    error: str | None = None  # the first failure's line
    checks: list[PreflightCheck] = []
    resolved: ResolvedView | None = None


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
    joules: float | None = None  # GPU energy on this launch (None: no power readings)


class JobView(Struct, kw_only=True):
    """A batch job as the agent shows it (agent/jobs_host.py): every `job_*` op's reply."""

    id: str
    name: str | None = None
    state: JobState
    slot: str
    pool: str | None = None  # sent through this host.toml pool's endpoint (then `slot` is moot)
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
    # (unix time, tok/s) points: `job_status` only
    rate_history: list[tuple[float, float]] | None = None
    joules: float | None = None  # GPU energy while the job ran (None: no power readings)
    decision: JobChoice | None = None  # --choose: the trial and its decision


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


class StatusReply(Struct, kw_only=True):
    agent: AgentInfo
    slots: list[SlotStatus]
    profiles: list[ProfileRow] = []
    telemetry: TelemetryView = field(default_factory=TelemetryView)
    bench: BenchRun | None = None  # the latest run
    jobs: list[JobView] = []
    pools: list[PoolStatus] = []
    unmanaged: list[Unmanaged] = []  # servers of this user the agent did not start


class StopReport(Struct, kw_only=True):
    """How a stop went (agent/slot.py Slot.stop): timings, what is still held, what it cut."""

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


# ---- ops --------------------------------------------------------------------------------------


class Op(Struct, frozen=True):
    args: type[Args]
    reply: Any  # the type of its result: `decode_reply` gives it (a test checks each op's)
    read_only: bool = False  # safe to ask again after a dropped connection; no "command" event
    doc: str = ""


R, W = True, False  # read-only, or a command
# The one list of ops. The agent handles op X in Supervisor.op_X, job_X in JobsHost.op_X.
OPS: Final[Mapping[str, Op]] = {
    "hello": Op(HelloArgs, HelloReply, R, "version handshake: a connection's first request"),
    "ping": Op(Args, PingReply, R, "is the agent alive: pid and version"),
    "status": Op(Args, StatusReply, R, "the STATUS object: agent, slots, profiles, telemetry"),
    "profiles": Op(ProfilesArgs, list[ProfileRow], R, "profiles in the agent's and given folders"),
    "logs": Op(LogsArgs, LogsReply, R, "the last lines of a slot's (or a launch's) server log"),
    "timeline": Op(TimelineArgs, TimelineReply, R, "recorded telemetry series"),
    "subscribe": Op(Args, Subscribed, R, "pushes (events, samples, log lines) on this connection"),
    "bench_list": Op(Args, list[BenchRun], R, "bench runs of this agent"),
    "bench_progress": Op(BenchProgressArgs, Noted, R, "a bench runner reports progress"),
    "preflight": Op(PreflightArgs, PreflightReply, R, "the checks a launch of a profile would run"),
    "start": Op(StartArgs, Accepted, W, "launch a profile into a stopped slot"),
    "stop": Op(StopArgs, Accepted, W, "drain and stop a slot's server"),
    "restart": Op(RestartArgs, Accepted, W, "stop and relaunch the slot's profile"),
    "swap": Op(SwapArgs, Accepted, W, "switch a slot to another profile (rollback on failure)"),
    "shutdown": Op(ShutdownArgs, ShutdownReply, W, "stop the agent (servers too: stop_servers)"),
    "bench_start": Op(BenchStartArgs, BenchStarted, W, "start a bench run from a spec"),
    "bench_stop": Op(BenchStopArgs, BenchRun, W, "stop a bench run (partial results are kept)"),
    "demo_load": Op(DemoLoadArgs, DemoLoadReply, W, "turn the demo load on or off"),
    "job_run": Op(JobRunArgs, JobView, W, "start a batch job from an OpenAI batch file"),
    "job_status": Op(JobArgs, JobView, R, "one batch job, in full"),
    "job_list": Op(Args, list[JobView], R, "every batch job of this agent"),
    "job_pause": Op(JobArgs, JobView, W, "pause a batch job"),
    "job_resume": Op(JobArgs, JobView, W, "resume a paused batch job"),
    "job_cancel": Op(JobArgs, JobView, W, "cancel a batch job (answers so far are kept)"),
    "job_set": Op(JobSetArgs, JobView, W, "change a job's concurrency or pinning"),
    "slot_expose": Op(ExposeArgs, Exposed, W, "serve a slot to another host's gateway (key)"),
    "remote_pool": Op(RemotePoolArgs, PoolStatus, W, "a gateway whose workers are on any host"),
    "standby_add": Op(StandbyArgs, Accepted, W, "keep a profile warm beside a slot's server"),
    "standby_remove": Op(StandbyArgs, Accepted, W, "stop a profile kept warm on a slot"),
    "attach": Op(AttachArgs, Attached, W, "watch a server sgltui did not start, in a slot"),
    "adopt": Op(AdoptArgs, Attached, W, "take over an attached server (a profile of its config)"),
    "detach": Op(SlotArgs, Attached, W, "stop watching an attached server (it runs on)"),
}
READ_ONLY_OPS: Final = frozenset(name for name, op in OPS.items() if op.read_only)
# Ops that work whatever the versions: enough to find and stop an agent of another version.
VERSIONLESS_OPS: Final = frozenset({"hello", "ping", "shutdown"})


def decode_reply(op: str, result: Any) -> Any:
    """An op's result, as the client got it (JSON values), -> its reply type in OPS (a Struct,
    or a list of them). A result of another shape is one ProtocolError line."""
    spec = OPS.get(op)
    if spec is None:
        raise ProtocolError(f"unknown op {op!r}; known: {', '.join(sorted(OPS))}")
    try:
        return msgspec.convert(result, spec.reply)
    except msgspec.ValidationError as exc:
        raise ProtocolError(f"the agent's reply to {op} is malformed: {exc}") from None
