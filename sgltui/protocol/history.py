"""The session's history and the one reducer: apply(state, event) -> state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec
from msgspec import Struct, field

from sgltui.protocol.base import BenchState, SlotState
from sgltui.protocol.events import (
    AgentAdopt,
    AgentStart,
    BenchDone,
    BenchProgress,
    BenchStart,
    Capacity,
    Cause,
    Command,
    CommandRefused,
    DiskError,
    DiskOk,
    EventBase,
    FrontHold,
    FrontRelease,
    FrontRoute,
    Launch,
    OtherEvent,
    SlotPhase,
    SlotStateChanged,
    SwapDone,
    SwapFailure,
    SwapStep,
    decode_event,
)
from sgltui.protocol.views import (
    AgentView,
    BenchView,
    DiskView,
    FrontView,
    LastSwap,
    ProfileSeen,
    SlotView,
    SwapView,
    bench_progress_view,
    capacity_card,
)

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
        if state != SlotState.LAUNCHING:  # progress is a launch's (agent/slot/slot.py _estimate)
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
        return {**state.bench, ev.run_id: BenchView(run_id=ev.run_id, started=ev.ts, path=ev.path)}
    if isinstance(ev, BenchProgress) and ev.run_id:
        run = state.bench.get(ev.run_id) or BenchView(run_id=ev.run_id)
        return {**state.bench, ev.run_id: r(run, progress=bench_progress_view(ev))}
    if isinstance(ev, BenchDone) and ev.run_id:
        run = state.bench.get(ev.run_id) or BenchView(run_id=ev.run_id)
        done = ev.state or (BenchState.FAILED if ev.ok is False or ev.error else BenchState.DONE)
        return {**state.bench, ev.run_id: r(run, state=done, path=ev.path or run.path)}
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
