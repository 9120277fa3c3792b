"""What the TUI knows, rebuilt from the agent's STATUS and its pushes.

Plain Python (no Textual) so the rules (which push changes what, how much history is kept) are
tested without a terminal. The app feeds it a STATUS snapshot on (re)connect and every push after
that; widgets only ever read it. Every buffer is bounded: a 24 h session must not grow memory.

The slots are protocol's Structs, folded by protocol.apply (the reducer replay and the report
use); profiles, pools, jobs and the agent's line are protocol's Structs too. Everything per slot
is keyed by the slot's name: one slot is the case of a list of one.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from sgltui import protocol
from sgltui.core.steady import WindowMean
from sgltui.tui import typed
from sgltui.tui.activity_items import ActivityItem, activity_item
from sgltui.tui.source import Pushed, decode_push

# Series drawn by the throughput pane: name -> key of ENGINE in STATUS/SAMPLE.
SERIES = {
    "gen_throughput": "gen_throughput",
    "running": "num_running_reqs",
    "queued": "num_queue_reqs",
    "token_usage": "token_usage",
    "accept_length": "accept_length",
}

# Areas a change can dirty; each maps to one pane (the app refreshes only those).
SERVERS, MEMORY, CHART, LOGS, ACTIVITY, BENCH, HEADER, JOBS = (
    "servers",
    "memory",
    "chart",
    "logs",
    "activity",
    "bench",
    "header",
    "jobs",
)
HOSTS = "hosts"  # a fleet's Hosts view (a host connected, dropped or changed)
AREAS = frozenset({SERVERS, MEMORY, CHART, LOGS, ACTIVITY, BENCH, HEADER, JOBS, HOSTS})
# A slot whose server is up or on its way (stop, restart and a swap apply; start does not).
ACTIVE = ("launching", "ready", "draining", "stopping")


# Event types that change a slot; after one of these the app re-reads STATUS (debounced) because
# an event carries only the fields that changed.
def _events(*names: str) -> frozenset[type[protocol.EventBase]]:
    """The event Structs of these types (a name no longer in the protocol fails at import)."""
    return frozenset(protocol.EVENT_TYPES[n] for n in names)


_SLOT_EVENTS = _events(
    "slot.state", "slot.phase", "swap.step", "swap.done", "launch", "capacity", "agent.adopt"
)
# what only a fresh STATUS fully describes: a slot's change, a bench's, a pool roll's progress,
# the gateway's state
_REFRESH_EVENTS = _SLOT_EVENTS | _events(
    "bench.start",
    "bench.done",
    "agent.start",
    *(n for n in protocol.EVENT_TYPES if n.startswith(("pool.", "gateway."))),
)
_JOB_EVENTS = _events(*(n for n in protocol.EVENT_TYPES if n.startswith("job.")))
# Events protocol.apply gives the state back for as it is (history.apply: never a slot's).
_SAME_STATE = frozenset({protocol.Command, protocol.CommandRefused, protocol.OtherEvent})


@dataclass
class BenchRun:
    run_id: str
    state: str = "running"  # running | done | failed | stopped
    progress: protocol.BenchProgressView | None = None
    path: str | None = None
    result: dict[str, Any] | None = None  # the bench/<run-id>.json content once read
    slot: str | None = None  # the slot its sweep uses (None: a --url run, or not known)


# Series whose total over slots is their sum; the others are the mean of the slots reporting.
_SUMMED = ("gen_throughput", "running", "queued")
_ENDED_JOBS = (protocol.JobState.DONE, protocol.JobState.CANCELLED, protocol.JobState.FAILED)
# What a job event says of its job's state (the other events change counts only).
_JOB_STATE = {
    "job.pause": protocol.JobState.PAUSED,
    "job.resume": protocol.JobState.RUNNING,
    "job.cancel": protocol.JobState.CANCELLED,
    "job.done": protocol.JobState.DONE,
    "job.error": protocol.JobState.FAILED,
}
# Job events whose job is worth reading again in full (segments, ETA, a new job).
_JOB_REREAD = _events(
    "job.start",
    "job.checked",
    "job.segment.start",
    "job.segment",
    "job.done",
    "job.error",
    "job.resume",
    "job.runner_exit",
    "job.held",
    "job.release",
)
_JOB_COUNTS = (
    "answered",
    "failed",
    "total",
    "in_flight",
    "completions_s",
    "tok_s",
    "concurrency",
    "pinned",
    "out_tokens",
)
HISTORY_RECORDS = 50  # launches, swaps and failures the model keeps (the report reads the session)


class _Figures(msgspec.Struct):
    """The figures of one engine reading that the chart draws (SERIES's keys), read out of the
    reading's JSON in one conversion for all slots (a sample of 8 slots read them one dict.get
    at a time: ~50 calls a second). Any value: the reading is SGLang's, converted as before."""

    gen_throughput: Any = None
    num_running_reqs: Any = None
    num_queue_reqs: Any = None
    token_usage: Any = None
    accept_length: Any = None


def _figures_of(engine: Mapping[Any, Any]) -> dict[str, _Figures]:
    """Each slot's chart figures of a sample's `engine` (slot -> reading), in one conversion."""
    try:
        return msgspec.convert(engine, dict[str, _Figures])
    except msgspec.ValidationError:  # a reading that is no object, or odd keys: one by one
        names = _Figures.__struct_fields__
        return {
            str(sid): _Figures(*(reading.get(name) for name in names))
            for sid, reading in engine.items()
            if isinstance(reading, dict)
        }


def total_engine(engines: list[dict[str, Any]]) -> dict[str, float]:
    """The chart's reading of several slots at one moment: throughput and requests summed, KV
    usage and accept length the mean of the slots that report them. One slot: its own values."""
    return _total(msgspec.convert(engines, list[_Figures]))


def _total(figures: Iterable[_Figures]) -> dict[str, float]:
    # One pass over the slots, each figure summed as it is read: a list per series and its
    # sum and len were ~15 calls a sample (an append per figure, ~40 before them).
    gen = running = queued = usage = spec = 0.0
    n_usage = n_spec = 0
    for f in figures:
        if f.gen_throughput is not None:
            gen += float(f.gen_throughput)
        if f.num_running_reqs is not None:
            running += float(f.num_running_reqs)
        if f.num_queue_reqs is not None:
            queued += float(f.num_queue_reqs)
        if f.token_usage is not None:
            usage += float(f.token_usage)
            n_usage += 1
        if f.accept_length is not None and (length := float(f.accept_length)) > 0:
            spec += length
            n_spec += 1
    return {
        "gen_throughput": gen,
        "running": running,
        "queued": queued,
        "token_usage": usage / n_usage if n_usage else 0.0,
        "accept_length": spec / n_spec if n_spec else 0.0,
    }


def followed_slot(slots: Mapping[str, Any], selected: str | None) -> str | None:
    """The slot the panes of one slot follow among `slots` (by id): the one `selected` in the
    slots view, else the first. (TuiModel.current_id; the Insight pane's plan of a reading.)"""
    if selected in slots:
        return selected
    return next(iter(slots), None)


class TuiModel:
    """The TUI's view of one agent (or one replayed session)."""

    def __init__(
        self,
        *,
        history_points: int = 600,
        activity_items: int = 200,
        own_client: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # The slots (SlotStatus values, in the agent's order), folded by protocol.apply.
        self.state = protocol.SessionState()
        self.agent = typed.agent({})
        self.profile_rows: list[protocol.ProfileRow] = []
        self.pools: list[protocol.PoolStatus] = []
        self.endpoint: protocol.EndpointView | None = None  # the agent's OpenAI endpoint
        self.unmanaged: list[protocol.Unmanaged] = []  # found, not started by sgltui
        self.telemetry = protocol.TelemetryView()
        self.jobs: dict[str, protocol.JobView] = {}  # by id, oldest first
        self.jobs_error: str | None = None  # why the jobs could not be read (a replay)
        self.history_points = history_points
        # The chart's series: the total over the slots (one slot: its own figures).
        self.series: dict[str, deque[tuple[float, float]]] = {
            n: deque(maxlen=history_points) for n in SERIES
        }
        # Each slot's gen tok/s, for the chart's series per slot and the slots view.
        self.slot_series: dict[str, deque[tuple[float, float]]] = {}
        # Swaps the chart marks: (ts, slot, label), label the profile swapped to ("... failed"
        # when it did not come up). Only the last few fit in a five-minute chart anyway.
        self.swaps: deque[tuple[float, str, str]] = deque(maxlen=20)
        self.activity: deque[ActivityItem] = deque(maxlen=activity_items)
        self.activity_total = 0  # items ever added (the deque drops old ones; panes track this)
        self.bench: dict[str, BenchRun] = {}
        self.own_client = own_client
        self.demo_only = False  # `sgltui demo`: show and key only the demo profiles
        self.connected = False
        self.connection_note = "connecting to the agent..."
        self.selected: str | None = None  # the slot the panes of one slot follow (None: first)
        # Several hosts (fleet.toml): slots are host/slot, the slots view always shows, and the
        # memory pane shows the GPUs of the followed slot's host.
        self.fleet = False
        self.clock = clock
        self._last_sample_ts: float | None = None
        # The host's CPU figure as `top` shows it, the mean of each 3 s: read each second it
        # moved on every sample, and repainting it was most of what an idle TUI drew.
        self._host_cpu = WindowMean()

    # -- reading ---------------------------------------------------------------------------

    # The state's slots dict and the slots read from it (see `slots`).
    _slots_read: tuple[dict[str, protocol.SlotView], list[protocol.SlotStatus]] | None = None

    @property
    def slots(self) -> list[protocol.SlotStatus]:
        """The slots as STATUS slots, in the agent's order. Each is converted (two calls a
        slot), so the list is kept while the state holds the same slots dict: the model
        replaces that dict whenever a slot changes (a STATUS, an event), never changes it in
        place. The slots view and the memory pane read it with every sample (8 slots: 16
        calls each, each second). The list is shared: read it, never change it."""
        known, read = self.state.slots, self._slots_read
        if read is None or read[0] is not known:
            read = self._slots_read = (known, [typed.as_status_slot(s) for s in known.values()])
        return read[1]

    @property
    def slot_ids(self) -> list[str]:
        return list(self.state.slots)

    @property
    def several(self) -> bool:
        """More than one slot: the slots view shows, a profile key asks slot or pool."""
        return self.fleet or len(self.state.slots) > 1 or bool(self.unmanaged)

    @property
    def current_id(self) -> str | None:
        """The slot the panes of one slot (details, logs, insight, keys) follow."""
        return followed_slot(self.state.slots, self.selected)

    @property
    def current(self) -> protocol.SlotStatus | None:
        sid = self.current_id
        return self.slot(sid) if sid is not None else None

    def slot(self, slot_id: str) -> protocol.SlotStatus | None:
        found = self.state.slots.get(slot_id)
        return typed.as_status_slot(found) if found is not None else None

    def pool_slots(self, name: str) -> list[str]:
        return next((list(p.slots) for p in self.pools if p.name == name), [])

    def pool_of(self, slot_id: str) -> protocol.PoolStatus | None:
        """The pool the slot serves in, if any (a slot is in one pool at most)."""
        return next((p for p in self.pools if slot_id in p.slots), None)

    @property
    def profiles(self) -> list[protocol.ProfileRow]:
        """Profiles in display order: a demo session lists only the demo profiles, any other lists
        them last. (Keys never depend on the order: a key given to two profiles does nothing.)"""
        demo = [p for p in self.profile_rows if p.name.startswith("demo-")]
        if self.demo_only and demo:
            return list(demo)
        return [p for p in self.profile_rows if p not in demo] + demo

    def profile(self, name: str | None) -> protocol.ProfileRow | None:
        return next((p for p in self.profile_rows if p.name == name), None)

    @property
    def demo_load(self) -> bool:
        return self.agent.demo_load

    @property
    def session_dir(self) -> str | None:
        return self.agent.session_dir or None

    @property
    def memory_view(self) -> protocol.TelemetryView:
        """The telemetry the memory pane draws: as recorded, but the host's CPU figure is the
        steady one (the session keeps every sample)."""
        r = msgspec.structs.replace
        tel = self.telemetry
        if self.fleet:
            tel = r(tel, gpus=self.gpus_of(self.current_id))
        host = tel.host
        if host is None or self._host_cpu.shown is None:
            return tel
        return r(tel, host=r(host, cpu_pct=self._host_cpu.shown))

    def gpus_of(self, slot_id: str | None) -> list[protocol.GpuView]:
        """The GPUs of the slot's host (a fleet tags each GPU with its host; one host: all)."""
        gpus = self.telemetry.gpus
        if not self.fleet:
            return gpus
        host = slot_id.partition("/")[0] if slot_id and "/" in slot_id else None
        return [g for g in gpus if g.host == host]

    def _note_host_cpu(self, telemetry: protocol.TelemetryView) -> None:
        ts, cpu = telemetry.ts, telemetry.host.cpu_pct if telemetry.host else None
        if ts and cpu is not None:
            self._host_cpu.add(float(ts), float(cpu))

    def engine(self, slot_id: str) -> dict[str, Any] | None:
        return self.telemetry.engine.get(slot_id)

    def running_requests(self, slot_id: str) -> int:
        """Requests in flight on the slot (running + queued): what a swap or stop would cut.
        A reading taken before the server was ready counts none: it saw the server's own
        warm-up request, and a key pressed at once must not ask how to drain it."""
        eng = self.engine(slot_id) or {}
        slot = self.slot(slot_id)
        ready_at, ts = (slot.ready_at if slot else None), eng.get("ts")
        if ready_at is not None and isinstance(ts, (int, float)) and ts < ready_at:
            return 0
        return int(eng.get("num_running_reqs") or 0) + int(eng.get("num_queue_reqs") or 0)

    def profile_for_key(self, key: str) -> protocol.ProfileRow | None:
        """The one profile on `key`; None when none or several have it (a clash: the key does
        nothing until the profiles are fixed)."""
        found = self.profiles_for_key(key)
        return found[0] if len(found) == 1 else None

    def profiles_for_key(self, key: str) -> list[protocol.ProfileRow]:
        return [p for p in self.profiles if p.key and str(p.key) == key]

    def series_values(self, name: str) -> list[float]:
        return [v for _, v in self.series[name]]

    # The swaps and `several` the chart's markers were made of, and those (see chart_marks).
    _marks_read: tuple[tuple[object, ...], list[tuple[float, str]]] | None = None

    def chart_marks(self) -> list[tuple[float, str]]:
        """The chart's swap markers: the profile swapped to, and with several slots whose.
        The same list while the swaps and `several` are the same: the chart asks each sample,
        and makes its copy only of another list. Shared: read it, never change it."""
        swaps, several = self.swaps, self.several
        read = (len(swaps), swaps[-1] if swaps else None, several)
        kept = self._marks_read
        if kept is None or kept[0] != read:
            kept = self._marks_read = (read, _marks_of(swaps, several))
        return kept[1]

    def chart_slots(self) -> dict[str, deque[tuple[float, float]]]:
        """The series per slot the chart draws under the total: none for one slot (a server
        found running beside it makes the slots view show, not a second series: its one
        series read as a stray "0" in the legend)."""
        if not (self.fleet or len(self.state.slots) > 1):
            return {}
        return {sid: self.slot_series[sid] for sid in self.state.slots if sid in self.slot_series}

    # -- updating (each returns the set of areas that changed) ------------------------------

    def apply_status(self, status: dict[str, Any]) -> set[str]:
        """Replace the snapshot; only the areas whose part of it changed are returned, because
        the app polls STATUS and redrawing unchanged panes is most of an idle TUI's CPU."""
        changed: set[str] = set()
        slots = {}
        for raw in status.get("slots") or []:
            s = typed.slot(raw)
            slots[s.id] = s
        profiles = [typed.profile(p) for p in status.get("profiles") or []]
        pools = [typed.pool(p) for p in status.get("pools") or []]
        found = [typed.unmanaged(u) for u in status.get("unmanaged") or []]
        if found != self.unmanaged:  # servers of the user's the agent did not start
            self.unmanaged = found
            changed.add(SERVERS)
        agent = typed.agent(status.get("agent"))
        endpoint = typed.endpoint(status.get("endpoint"))
        if endpoint != self.endpoint:
            self.endpoint = endpoint
            changed.add(SERVERS)
        if (
            list(self.state.slots.values()) != list(slots.values())
            or profiles != self.profile_rows
            or pools != self.pools
        ):
            changed.add(SERVERS)
        if agent != self.agent:
            changed |= {HEADER, SERVERS}
        old_tel = self.telemetry
        self.telemetry = protocol.telemetry_view(status.get("telemetry"))
        if old_tel.gpus != self.telemetry.gpus or old_tel.host != self.telemetry.host:
            changed.add(MEMORY)
        self.state = msgspec.structs.replace(
            self.state,
            slots=slots,
            agent=protocol.AgentView(
                pid=agent.pid or None, version=agent.version or None, started=agent.started
            ),
        )
        self.profile_rows, self.pools, self.agent = profiles, pools, agent
        self._note_host_cpu(self.telemetry)
        bench = typed.bench_run(status.get("bench"))
        if bench is not None and self._bench_from_status(bench):
            changed.add(BENCH)
        if "jobs" in status:
            jobs = [j for j in map(typed.job, status.get("jobs") or []) if j is not None]
            if self.set_jobs(jobs):
                changed.add(JOBS)
        engine = self.telemetry.engine
        if engine and not any(self.series.values()):
            _append_series(self, self.telemetry.ts or self.clock(), engine)
            changed.add(CHART)
        return changed

    def apply_push(self, push: Mapping[str, Any] | Pushed) -> set[str]:
        # (the app's are decoded already: taken as they are, no call to say so)
        pushed = push if type(push) is Pushed else decode_push(push)
        kind = pushed.kind
        data = pushed.data or {}
        if kind == "sample":
            return self._apply_sample(data)
        if pushed.event is not None:
            return self._apply_event(pushed.event)
        if kind == "log":
            return {LOGS}  # lines are held by the log buffer; the model only routes
        if kind == "note":  # a line of an op the source runs itself (a fleet's pool roll)
            title, text = str(data.get("title") or ""), str(data.get("text") or "")
            if title and not text.startswith(title):
                text = f"{title}: {text}"
            level = "error" if data.get("level") == "error" else "info"
            # (this TUI's own op: its client, as the commands it sends for it are)
            self.activity.append(ActivityItem(self.clock(), self.own_client, text, level))
            self.activity_total += 1
            return {ACTIVITY}
        return set()

    def needs_status_refresh(self, push: Mapping[str, Any] | Pushed) -> bool:
        """True when the push changes a slot in ways only a fresh STATUS fully describes."""
        pushed = push if type(push) is Pushed else decode_push(push)  # (the app's: decoded)
        return type(pushed.event) in _REFRESH_EVENTS

    def _apply_sample(self, sample: dict[str, Any]) -> set[str]:
        if "gpus" in sample and "engine" in sample and "ts" in sample and "host" in sample:
            # A whole sample (the agent's, every second): all of the telemetry, its GPU source
            # kept, read in one conversion (telemetry_view's own, inline: its copy, its Mapping
            # check through the ABC, its host check and the source's replace were 6 calls a
            # sample). A sample with no host yet, or one that does not read whole: read as
            # telemetry_view reads it.
            source = self.telemetry.gpu_source  # (a Struct: converted as it is, not copied)
            tel = None
            if sample["host"]:  # (telemetry_view makes an empty host None)
                try:
                    tel = msgspec.convert(
                        {**sample, "gpu_source": source}, protocol.TelemetryView, strict=False
                    )
                except msgspec.ValidationError:
                    pass
            if tel is None:
                tel = msgspec.structs.replace(protocol.telemetry_view(sample), gpu_source=source)
            ts, engine = sample["ts"], sample["engine"]
        else:  # a part (a recorded sample, an older agent): the parts it carries
            keys = [k for k in ("gpus", "host", "engine", "ts") if k in sample]
            part = protocol.telemetry_view({k: sample[k] for k in keys})
            tel = msgspec.structs.replace(self.telemetry, **{k: getattr(part, k) for k in keys})
            ts, engine = sample.get("ts"), sample.get("engine")
        self.telemetry = tel
        # (_note_host_cpu inline: a call less a sample)
        host = tel.host
        if tel.ts and host is not None and host.cpu_pct is not None:
            self._host_cpu.add(float(tel.ts), float(host.cpu_pct))
        _append_series(self, ts or self.clock(), engine or {})
        return {MEMORY, CHART}

    def _apply_event(self, event: protocol.EventBase) -> set[str]:
        # What an event means for a slot or a bench run is protocol.apply's to say (the same
        # fold as replay and report); the model only routes it to its panes.
        changed: set[str] = set()
        if isinstance(event, protocol.JobEvent):
            return self._apply_job_event(event)
        if type(event) in _SAME_STATE:
            # A command, a refusal or an event this version does not know: the reducer gives
            # the state back as it is, and none is a bench's or a swap's (not asked: ~18 calls
            # an event, one every few seconds). Its Activity line only.
            return {ACTIVITY} if self._add_activity(event) else changed
        before = self.state.slots.get(event.slot) if event.slot is not None else None
        if before is not None:  # a slot STATUS has not listed yet comes with the next STATUS
            state = protocol.apply(self.state, event)
            after = state.slots.get(event.slot or "")
            if isinstance(event, protocol.SlotDrain) and after is not None:
                after = msgspec.structs.replace(
                    typed.as_status_slot(after),
                    drain=protocol.DrainView(
                        requests=event.requests, left_s=event.left_s, timeout_s=event.timeout_s
                    ),
                )
            if after is not None and after is not before:
                slot = typed.as_status_slot(after)
                if slot.drain is not None and slot.state != protocol.SlotState.DRAINING:
                    slot = msgspec.structs.replace(slot, drain=None)
                state = msgspec.structs.replace(state, slots={**state.slots, slot.id: slot})
                changed.add(SERVERS)
            self.state = _bounded(state)
        if isinstance(event, (protocol.BenchStart, protocol.BenchProgress, protocol.BenchDone)):
            changed |= self._apply_bench_event(event)
        if self._add_swap(event):
            changed.add(CHART)
        if self._add_activity(event):
            changed.add(ACTIVITY)
        return changed

    def _add_activity(self, event: protocol.EventBase) -> bool:
        """Append the event's Activity item, if it makes one (live and from history alike)."""
        item = activity_item(event, self.own_client, self.clock)
        if item is None:
            return False
        self.activity.append(item)
        self.activity_total += 1
        return True

    def _add_swap(self, event: protocol.EventBase) -> bool:
        """Record a finished swap for the chart's marker; a swap a stop cut short changed
        nothing worth marking."""
        if not isinstance(event, protocol.SwapDone) or event.aborted:
            return False
        sid = event.slot if event.slot is not None else (self.current_id or "")
        label = str(event.to or "?") + ("" if event.ok else " failed")
        self.swaps.append((event.ts or self.clock(), sid, label))
        return True

    def _apply_bench_event(self, event: protocol.EventBase) -> set[str]:
        run_id = getattr(event, "run_id", "")
        if not run_id:
            return set()
        run = self.bench.setdefault(run_id, BenchRun(run_id))
        if isinstance(event, protocol.BenchStart) and not event.spec.get("url"):
            run.slot = str(event.spec.get("slot", "0"))
        known = protocol.BenchView(run_id=run_id, path=run.path, progress=run.progress)
        with contextlib.suppress(ValueError):
            known.state = protocol.BenchState(run.state)
        after = protocol.apply(protocol.SessionState(bench={run_id: known}), event).bench[run_id]
        run.state = str(after.state)
        run.progress = after.progress
        run.path = after.path
        return {BENCH}

    def _bench_from_status(self, info: protocol.BenchRun) -> bool:
        run = self.bench.setdefault(info.run_id, BenchRun(info.run_id))
        before = (run.state, run.path)
        run.state = str(info.state) or run.state
        run.path = info.path or run.path
        if not info.spec.url:
            run.slot = str(info.spec.slot)
        run.progress = info.progress or run.progress
        return before != (run.state, run.path)

    def bench_on(self, slot_id: str | None) -> BenchRun | None:
        """The running bench that sweeps `slot_id` (a swap of it stops the bench: it asks)."""
        for run in self.bench.values():
            if run.state == "running" and slot_id is not None and run.slot == str(slot_id):
                return run
        return None

    def set_bench_result(self, run_id: str, result: dict[str, Any]) -> set[str]:
        run = self.bench.setdefault(run_id, BenchRun(run_id, state="done"))
        run.result = result
        return {BENCH}

    # -- batch jobs ---------------------------------------------------------------------------

    @property
    def shown_job(self) -> protocol.JobView | None:
        """The job the Jobs tab shows: the newest active one, else the newest."""
        views = list(self.jobs.values())
        active = [v for v in views if v.state not in _ENDED_JOBS]
        return (active or views)[-1] if views else None

    @property
    def jobs_active(self) -> bool:
        return any(v.state not in _ENDED_JOBS for v in self.jobs.values())

    def set_jobs(self, views: list[protocol.JobView]) -> bool:
        """The agent's list of jobs (STATUS, `job_list`): the rate history and segments a full
        read gave are kept for a job whose list entry lacks them."""
        new: dict[str, protocol.JobView] = {}
        for v in sorted(views, key=lambda v: v.created):
            old = self.jobs.get(v.id)
            if old is not None and v.rate_history is None and old.rate_history is not None:
                v = msgspec.structs.replace(v, rate_history=old.rate_history)
            new[v.id] = v
        if new == self.jobs:
            return False
        self.jobs = new
        self.jobs_error = None
        return True

    def set_job(self, view: protocol.JobView) -> bool:
        """One job read in full (`job_status`)."""
        if self.jobs.get(view.id) == view:
            return False
        self.jobs[view.id] = view
        if list(self.jobs) != sorted(self.jobs, key=lambda j: self.jobs[j].created):
            self.jobs = dict(sorted(self.jobs.items(), key=lambda kv: kv[1].created))
        self.jobs_error = None
        return True

    def expect_job(self, job_id: str, **changes: Any) -> protocol.JobView | None:
        """A command sent for a job, shown at once: keys pressed faster than the agent answers
        build on each other (+ + doubles twice)."""
        view = self.jobs.get(job_id)
        if view is None:
            return None
        self.jobs[job_id] = view = msgspec.structs.replace(view, **changes)
        return view

    def _apply_job_event(self, event: protocol.JobEvent) -> set[str]:
        view = self.jobs.get(event.job)
        if view is None:
            return {JOBS}  # a job this model has not read: the Jobs tab reads it
        tag = str(type(event).__struct_config__.tag)
        changes: dict[str, Any] = {
            name: getattr(event, name) for name in _JOB_COUNTS if getattr(event, name) is not None
        }
        state = _JOB_STATE.get(tag)
        if tag == "job.done" and event.state:
            with contextlib.suppress(ValueError):
                state = protocol.JobState(event.state)
        if state is not None:
            changes["state"] = state
        if tag == "job.error" and event.message:
            changes["error"] = event.message
        if tag == "job.hold":
            changes["hold"] = event.reason or "swap"
        elif tag == "job.release":
            changes["hold"] = None
        if tag == "job.progress" and event.tok_s is not None and view.rate_history is not None:
            changes["rate_history"] = [*view.rate_history, (event.ts, event.tok_s)][-120:]
        if changes:
            self.jobs[event.job] = msgspec.structs.replace(view, **changes)
        return {JOBS}

    def job_needs_reading(self, push: Mapping[str, Any] | Pushed) -> str | None:
        """The job a pushed event says to read again in full (a new job, a segment, an end)."""
        event = (push if type(push) is Pushed else decode_push(push)).event
        if not isinstance(event, protocol.JobEvent) or type(event) not in _JOB_EVENTS:
            return None
        if type(event) in _JOB_REREAD or event.job not in self.jobs:
            return str(event.job) if event.job else None
        return None


def _append_series(model: TuiModel, ts: float, engine: Mapping[str, Any]) -> None:
    """A sample's figures onto the chart's series: the totals' and each slot's (a sample as
    old as the last one: none). Out of TuiModel for its size; its callers are the model's."""
    if model._last_sample_ts is not None and ts <= model._last_sample_ts:
        return
    try:  # (_figures_of's conversion inline: a call less a sample)
        figures = msgspec.convert(engine, dict[str, _Figures])
    except msgspec.ValidationError:
        figures = _figures_of(engine)
    if not figures:
        return
    model._last_sample_ts = ts
    slot_series = model.slot_series
    for sid, f in figures.items():
        if sid not in slot_series:  # (a subscript, not dict.get: no call per slot)
            slot_series[sid] = deque(maxlen=model.history_points)
        gen = f.gen_throughput
        slot_series[sid].append((ts, float(gen) if gen is not None else 0.0))
    # The totals by _total's rules, the chart's one reading of several slots (total_engine's
    # too): written once, a few calls a sample more than summing them in the loop above.
    series = model.series
    for name, value in _total(figures.values()).items():
        series[name].append((ts, value))


def _marks_of(swaps: Iterable[tuple[float, str, str]], several: bool) -> list[tuple[float, str]]:
    """The chart's markers of the model's swaps (ts, slot, profile): with several slots the
    label says whose."""
    return [(ts, f"{sid}:{label}" if several else label) for ts, sid, label in swaps]


def _bounded(state: protocol.SessionState) -> protocol.SessionState:
    """The state with its history cut to the last records: the reducer keeps every launch and
    swap of the session, and a 24 h TUI must not grow."""
    if max(len(state.launches), len(state.swaps), len(state.failures)) <= 2 * HISTORY_RECORDS:
        return state
    return msgspec.structs.replace(
        state,
        launches=state.launches[-HISTORY_RECORDS:],
        swaps=state.swaps[-HISTORY_RECORDS:],
        failures=state.failures[-HISTORY_RECORDS:],
    )


def load_history(
    model: TuiModel, timeline: dict[str, Any], events: list[dict[str, Any]]
) -> set[str]:
    """Fill a freshly connected model with what the agent holds from before: the chart series
    (`timeline` op: {"series": {"engine.<slot>.<key>": [[ts, value], ...]}}) and the Activity
    items of recent session events. Returns the areas to redraw."""
    changed: set[str] = set()
    series = (timeline or {}).get("series") or {}
    # ts -> slot -> engine reading, rebuilt from the series as one sample held them
    points: dict[float, dict[str, dict[str, float]]] = {}
    for name, values in series.items():
        parts = str(name).split(".")
        if len(parts) != 3 or parts[0] != "engine" or parts[2] not in SERIES.values():
            continue
        for item in values or []:
            if isinstance(item, (list, tuple)) and len(item) == 2 and item[1] is not None:
                points.setdefault(float(item[0]), {}).setdefault(parts[1], {})[parts[2]] = float(
                    item[1]
                )
    if points:
        # New series, not cleared ones: a chart keeps columns of the series it summed
        # (core.charts.ColumnMemo) and tells a history read again by the object.
        for name, values in model.series.items():
            model.series[name] = deque(maxlen=values.maxlen)
        model.slot_series.clear()
        model._last_sample_ts = None
        for ts in sorted(points):
            _append_series(model, ts, points[ts])
        changed.add(CHART)
    decoded = [protocol.decode_event(ev) for ev in events] if events else []
    if decoded and not model.swaps:
        for event in decoded:
            if model._add_swap(event):  # a swap.done's
                changed.add(CHART)
    if decoded and not model.activity:
        for event in decoded:
            model._add_activity(event)
        changed.add(ACTIVITY)
    return changed
