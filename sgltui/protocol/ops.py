"""The one list of ops, each with its arguments' and its reply's Struct."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec
from msgspec import Struct

from sgltui.protocol.args import (
    AdoptArgs,
    Args,
    AttachArgs,
    BenchStartArgs,
    BenchStopArgs,
    DemoLoadArgs,
    ExposeArgs,
    HelloArgs,
    JobArgs,
    JobRunArgs,
    JobSetArgs,
    LeaseArgs,
    LogsArgs,
    PreflightArgs,
    ProfilesArgs,
    RemotePoolArgs,
    RestartArgs,
    ShutdownArgs,
    SlotArgs,
    StandbyArgs,
    StartArgs,
    StopArgs,
    SubscribeArgs,
    SwapArgs,
    TimelineArgs,
)
from sgltui.protocol.base import ProtocolError
from sgltui.protocol.events import BenchProgressArgs
from sgltui.protocol.replies import (
    Accepted,
    Attached,
    BenchRun,
    BenchStarted,
    DemoLoadReply,
    Exposed,
    HelloReply,
    JobView,
    LeaseView,
    LogsReply,
    Noted,
    PingReply,
    PoolStatus,
    PreflightReply,
    ProfileRow,
    ShutdownReply,
    StatusReply,
    Subscribed,
    TimelineReply,
)

# ---- ops --------------------------------------------------------------------------------------


class Op(Struct, frozen=True):
    args: type[Args]
    reply: Any  # the type of its result: `decode_reply` gives it (a test checks each op's)
    read_only: bool = False  # safe to ask again after a dropped connection; no "command" event
    doc: str = ""


R, W = True, False  # read-only, or a command
# The one list of ops. The agent finds each op's handler in agent/op_routes.py's table.
OPS: Final[Mapping[str, Op]] = {
    "hello": Op(HelloArgs, HelloReply, R, "version handshake: a connection's first request"),
    "ping": Op(Args, PingReply, R, "is the agent alive: pid and version"),
    "status": Op(Args, StatusReply, R, "the STATUS object: agent, slots, profiles, telemetry"),
    "profiles": Op(ProfilesArgs, list[ProfileRow], R, "profiles in the agent's and given folders"),
    "logs": Op(LogsArgs, LogsReply, R, "the last lines of a slot's (or a launch's) server log"),
    "timeline": Op(TimelineArgs, TimelineReply, R, "recorded telemetry series"),
    # events as recorded: dicts, as pushed and in events.jsonl (protocol.decode_event types them)
    "events": Op(Args, list[dict[str, Any]], R, "the session's last events (Activity history)"),
    "subscribe": Op(
        SubscribeArgs, Subscribed, R, "pushes (events, samples, log lines) on this connection"
    ),
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
    "lease_add": Op(LeaseArgs, LeaseView, W, "a lease: the endpoint never evicts the profile"),
    "lease_drop": Op(LeaseArgs, list[LeaseView], W, "drop the leases held by hand on a profile"),
    "lease_list": Op(Args, list[LeaseView], R, "every lease: by jobs and by hand"),
    "attach": Op(AttachArgs, Attached, W, "watch a server sgltui did not start, in a slot"),
    "adopt": Op(AdoptArgs, Attached, W, "take over an attached server (a profile of its config)"),
    "detach": Op(SlotArgs, Attached, W, "stop watching an attached server (it runs on)"),
}
READ_ONLY_OPS: Final = frozenset(name for name, op in OPS.items() if op.read_only)
# Ops that work whatever the versions: enough to find and stop an agent of another version.
VERSIONLESS_OPS: Final = frozenset({"hello", "ping", "shutdown"})


def _named_by_args() -> dict[type[Args], str]:
    """Each arguments' Struct that serves one op only -> that op (exact types: SwapArgs is a
    StartArgs, but names "swap")."""
    ops: dict[type[Args], list[str]] = {}
    for name, spec in OPS.items():
        ops.setdefault(spec.args, []).append(name)
    return {t: names[0] for t, names in ops.items() if len(names) == 1}


OP_OF_ARGS: Final[Mapping[type[Args], str]] = _named_by_args()


def op_for(args: Args, op: str | None = None) -> str:
    """The op `args` are for: the one its Struct names, or `op` where the Struct serves several
    (JobArgs, StandbyArgs, LeaseArgs, plain Args), checked against it."""
    named = OP_OF_ARGS.get(type(args))
    if op is None:
        if named is None:
            users = sorted(n for n, s in OPS.items() if s.args is type(args))
            raise TypeError(
                f"{type(args).__name__} serves several ops ({', '.join(users)}): name one"
            )
        return named
    spec = OPS.get(op)
    if spec is None or spec.args is not type(args) or (named is not None and named != op):
        raise TypeError(f"op {op!r} does not take {type(args).__name__}")
    return op


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
