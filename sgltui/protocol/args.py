"""The arguments of each op: one Struct per op (unknown names are refused)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct, field

from sgltui.protocol.base import Drain

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


class SubscribeArgs(Args):
    # "each": a "log" push per slot as its server prints (all that protocol 3 had);
    # "tick": every slot's new lines in one "logs" push per tick, sent with the sample (8 idle
    # servers' health-check lines were a dozen pushes a second, each a wake-up of the TUI).
    logs: Literal["each", "tick"] = "each"


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
# Preflight checks to skip (`--force CHECK`); the agent knows their names (agent/swap/preflight.py).
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


class LeaseArgs(Args):
    """lease add / drop: a profile the agent endpoint must not evict (agent/endpoint/leases.py)."""

    profile: ProfileName = ""
    slot: SlotId | None = None  # only while it runs on this slot (None: wherever it runs)
    for_s: Annotated[float, Meta(gt=0, le=366 * 86400)] | None = None  # None: until dropped


class BenchSpec(Struct, forbid_unknown_fields=True, kw_only=True):
    """What a bench run measures, declared once: bench/spec.py's BenchSpec subclasses it with the
    runner's checks (the protocol cannot import the bench). Unknown names are refused, as in
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
    # --choose auto: each candidate's flags as a delta of the serving profile (sgltui advise)
    choose_deltas: dict[Annotated[str, Meta(max_length=255)], dict[str, Any]] | None = None
    # ... and every proposal, tried or not (name, delta, reason, figure, cost, bound): the report
    choose_advice: list[dict[str, Any]] | None = None
    # ... and each candidate's cache warm-up: requests its new server runs before it is measured
    choose_warmup: dict[Annotated[str, Meta(max_length=255)], int] | None = None
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


KeyFile = Annotated[str, Meta(min_length=2, max_length=4096, pattern=r"^/")]


class AttachArgs(SlotArgs, kw_only=True):
    """Watch a server sgltui did not start (agent/slot/attach.py): `url`, with its key if it needs
    one. `slot`: the slot it becomes (None: the only slot when idle, else ext-PORT)."""

    url: Annotated[str, Meta(min_length=1, max_length=512, pattern=r"^https?://")]
    api_key: Annotated[str, Meta(max_length=4096)] | None = None
    # Where the keys are (absolute paths): an adopted profile names these files, never the keys.
    api_key_file: KeyFile | None = None
    admin_api_key_file: KeyFile | None = None


class AdoptArgs(SlotArgs):
    """Take over an attached server: its effective configuration becomes profile `name`
    (None: ext-PORT) in the agent's profile folder; swap and stop then treat it as launched.
    The key files (else those given to attach) are what the profile's [key-files] name."""

    name: Annotated[str, Meta(min_length=1, max_length=64)] | None = None
    api_key_file: KeyFile | None = None
    admin_api_key_file: KeyFile | None = None


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
