"""What the TUI knows, rebuilt from the agent's STATUS and its pushes.

Plain Python (no Textual) so the rules (which push changes what, how much history is kept) are
tested without a terminal. The app feeds it a STATUS snapshot on (re)connect and every push after
that; widgets only ever read it. Every buffer is bounded: a 24 h session must not grow memory.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sgltui import protocol
from sgltui.core import units
from sgltui.core.safe_text import printable_profile_row
from sgltui.core.steady import WindowMean

# Series drawn by the throughput pane: name -> key of ENGINE in STATUS/SAMPLE.
SERIES = {
    "gen_throughput": "gen_throughput",
    "running": "num_running_reqs",
    "queued": "num_queue_reqs",
    "token_usage": "token_usage",
    "accept_length": "accept_length",
}

# Areas a change can dirty; each maps to one pane (the app refreshes only those).
SERVERS, MEMORY, CHART, LOGS, ACTIVITY, BENCH, HEADER = (
    "servers",
    "memory",
    "chart",
    "logs",
    "activity",
    "bench",
    "header",
)

# Event types that change a slot; after one of these the app re-reads STATUS (debounced) because
# an event carries only the fields that changed.
_SLOT_EVENTS = {
    "slot.state",
    "slot.phase",
    "swap.step",
    "swap.done",
    "launch",
    "capacity",
    "agent.adopt",
}


@dataclass
class ActivityItem:
    """One line of the activity pane: a command or a notable event, with who issued it."""

    ts: float
    client: str | None
    text: str
    level: str = "info"  # info | warning | error
    foreign: bool = False  # issued by another client (CLI, a second TUI)


@dataclass
class BenchRun:
    run_id: str
    state: str = "running"  # running | done | failed | stopped
    progress: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    result: dict[str, Any] | None = None  # the bench/<run-id>.json content once read


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
        self.status: dict[str, Any] = {}
        self.history_points = history_points
        self.series: dict[str, deque[tuple[float, float]]] = {
            n: deque(maxlen=history_points) for n in SERIES
        }
        # Swaps the chart marks: (ts, label), label the profile swapped to ("... failed" when
        # it did not come up). Only the last few fit in a five-minute chart anyway.
        self.swaps: deque[tuple[float, str]] = deque(maxlen=20)
        self.activity: deque[ActivityItem] = deque(maxlen=activity_items)
        self.activity_total = 0  # items ever added (the deque drops old ones; panes track this)
        self.bench: dict[str, BenchRun] = {}
        self.own_client = own_client
        self.demo_only = False  # `sgltui demo`: show and key only the demo profiles
        self.connected = False
        self.connection_note = "connecting to the agent..."
        self.clock = clock
        self._last_sample_ts: float | None = None
        # The host's CPU figure as `top` shows it, the mean of each 3 s: read each second it
        # moved on every sample, and repainting it was most of what an idle TUI drew.
        self._host_cpu = WindowMean()

    # -- reading ---------------------------------------------------------------------------

    @property
    def slots(self) -> list[dict[str, Any]]:
        return list(self.status.get("slots") or [])

    @property
    def profiles(self) -> list[dict[str, Any]]:
        """Profiles in display order: a demo session lists only the demo profiles, any other lists
        them last. (Keys never depend on the order: a key given to two profiles does nothing.)"""
        profiles = [printable_profile_row(p) for p in self.status.get("profiles") or []]
        demo = [p for p in profiles if str(p.get("name", "")).startswith("demo-")]
        if self.demo_only and demo:
            return demo
        return [p for p in profiles if p not in demo] + demo

    def slot(self, slot_id: str = "0") -> dict[str, Any] | None:
        for s in self.slots:
            if str(s.get("id")) == slot_id:
                return s
        return None

    @property
    def telemetry(self) -> dict[str, Any]:
        return self.status.get("telemetry") or {}

    @property
    def memory_view(self) -> dict[str, Any]:
        """The telemetry the memory pane draws: as recorded, but the host's CPU figure is the
        steady one (the session keeps every sample)."""
        tel = self.telemetry
        host = tel.get("host")
        if not isinstance(host, dict) or self._host_cpu.shown is None:
            return tel
        return {**tel, "host": {**host, "cpu_pct": self._host_cpu.shown}}

    def _note_host_cpu(self, telemetry: dict[str, Any]) -> None:
        ts, cpu = telemetry.get("ts"), (telemetry.get("host") or {}).get("cpu_pct")
        if isinstance(ts, (int, float)) and isinstance(cpu, (int, float)):
            self._host_cpu.add(float(ts), float(cpu))

    def engine(self, slot_id: str = "0") -> dict[str, Any] | None:
        return (self.telemetry.get("engine") or {}).get(slot_id)

    def running_requests(self, slot_id: str = "0") -> int:
        """Requests in flight on the slot (running + queued): what a swap or stop would cut.
        A reading taken before the server was ready counts none: it saw the server's own
        warm-up request, and a key pressed at once must not ask how to drain it."""
        eng = self.engine(slot_id) or {}
        ready_at, ts = (self.slot(slot_id) or {}).get("ready_at"), eng.get("ts")
        if isinstance(ready_at, (int, float)) and isinstance(ts, (int, float)) and ts < ready_at:
            return 0
        return int(eng.get("num_running_reqs") or 0) + int(eng.get("num_queue_reqs") or 0)

    def profile_for_key(self, key: str) -> dict[str, Any] | None:
        """The one profile on `key`; None when none or several have it (a clash: the key does
        nothing until the profiles are fixed)."""
        found = self.profiles_for_key(key)
        return found[0] if len(found) == 1 else None

    def profiles_for_key(self, key: str) -> list[dict[str, Any]]:
        return [p for p in self.profiles if p.get("key") and str(p["key"]) == key]

    def series_values(self, name: str) -> list[float]:
        return [v for _, v in self.series[name]]

    # -- updating (each returns the set of areas that changed) ------------------------------

    def apply_status(self, status: dict[str, Any]) -> set[str]:
        """Replace the snapshot; only the areas whose part of it changed are returned, because
        the app polls STATUS and redrawing unchanged panes is most of an idle TUI's CPU."""
        old = self.status
        self.status = dict(status)
        changed: set[str] = set()
        if old.get("slots") != status.get("slots") or old.get("profiles") != status.get("profiles"):
            changed.add(SERVERS)
        if old.get("agent") != status.get("agent"):
            changed |= {HEADER, SERVERS}
        if (old.get("telemetry") or {}).get("gpus") != self.telemetry.get("gpus") or (
            old.get("telemetry") or {}
        ).get("host") != self.telemetry.get("host"):
            changed.add(MEMORY)
        if old.get("bench") != status.get("bench"):
            changed.add(BENCH)
        self._note_host_cpu(self.telemetry)
        bench = status.get("bench")
        if isinstance(bench, dict):
            self._bench_from_status(bench)
        engine = self.telemetry.get("engine") or {}
        if engine and not any(self.series.values()):
            self._append_series(self.telemetry.get("ts") or self.clock(), engine)
            changed.add(CHART)
        return changed

    def apply_push(self, push: dict[str, Any]) -> set[str]:
        kind = push.get("push")
        data = push.get("data") or {}
        if kind == "sample":
            return self._apply_sample(data)
        if kind == "event":
            return self._apply_event(data)
        if kind == "log":
            return {LOGS}  # lines are held by the log buffer; the model only routes
        return set()

    def needs_status_refresh(self, push: dict[str, Any]) -> bool:
        """True when the push changes a slot in ways only a fresh STATUS fully describes."""
        if push.get("push") != "event":
            return False
        t = (push.get("data") or {}).get("type", "")
        return t in _SLOT_EVENTS or t in ("bench.start", "bench.done", "agent.start")

    def _apply_sample(self, sample: dict[str, Any]) -> set[str]:
        tel = dict(self.telemetry)
        for key in ("gpus", "host", "engine", "ts"):
            if key in sample:
                tel[key] = sample[key]
        self.status["telemetry"] = tel
        self._note_host_cpu(tel)
        self._append_series(sample.get("ts") or self.clock(), sample.get("engine") or {})
        return {MEMORY, CHART}

    def _append_series(self, ts: float, engine: dict[str, Any]) -> None:
        if self._last_sample_ts is not None and ts <= self._last_sample_ts:
            return
        # The chart follows slot 0 (the serving slot); other slots are shown in the servers pane.
        eng = engine.get("0") or (next(iter(engine.values())) if engine else None)
        if eng is None:
            return
        self._last_sample_ts = ts
        for name, key in SERIES.items():
            value = eng.get(key)
            self.series[name].append((ts, float(value) if value is not None else 0.0))

    def _apply_event(self, ev: dict[str, Any]) -> set[str]:
        # What an event means for a slot or a bench run is protocol.apply's to say (the same
        # fold as replay and report); the model only routes it to its panes.
        event = protocol.decode_event(ev)
        changed: set[str] = set()
        slot = self.slot(event.slot) if event.slot is not None else None
        if slot is not None and protocol.apply_to_status_slot(slot, event):
            changed.add(SERVERS)
        if isinstance(event, (protocol.BenchStart, protocol.BenchProgress, protocol.BenchDone)):
            changed |= self._apply_bench_event(event)
        if self._add_swap(event):
            changed.add(CHART)
        item = self._activity_item(ev)
        if item is not None:
            self.activity.append(item)
            self.activity_total += 1
            changed.add(ACTIVITY)
        return changed

    def _add_swap(self, event: protocol.EventBase) -> bool:
        """Record a finished swap of slot 0 (the slot the chart follows) for the chart's marker;
        a swap a stop cut short changed nothing worth marking."""
        if (
            not isinstance(event, protocol.SwapDone)
            or event.aborted
            or event.slot not in (None, "0")
        ):
            return False
        label = str(event.to or "?") + ("" if event.ok else " failed")
        self.swaps.append((event.ts or self.clock(), label))
        return True

    def _apply_bench_event(self, event: protocol.EventBase) -> set[str]:
        run_id = getattr(event, "run_id", "")
        if not run_id:
            return set()
        run = self.bench.setdefault(run_id, BenchRun(run_id))
        known = protocol.BenchView(run_id=run_id, path=run.path, progress=run.progress or None)
        with contextlib.suppress(ValueError):
            known.state = protocol.BenchState(run.state)
        after = protocol.apply(protocol.SessionState(bench={run_id: known}), event).bench[run_id]
        run.state = str(after.state)
        run.progress = dict(after.progress or {})
        run.path = after.path
        return {BENCH}

    def _bench_from_status(self, info: dict[str, Any]) -> None:
        run_id = info.get("run_id")
        if run_id:
            run = self.bench.setdefault(run_id, BenchRun(run_id))
            run.state = info.get("state") or run.state
            run.path = info.get("path") or run.path

    def set_bench_result(self, run_id: str, result: dict[str, Any]) -> set[str]:
        run = self.bench.setdefault(run_id, BenchRun(run_id, state="done"))
        run.result = result
        return {BENCH}

    def _activity_item(self, ev: dict[str, Any]) -> ActivityItem | None:
        t = ev.get("type", "")
        client = ev.get("client")
        foreign = bool(client) and client != self.own_client
        ts = float(ev.get("ts") or self.clock())
        if t == "command":
            args = ev.get("args") or {}
            shown = " ".join(
                f"{k}={v}" for k, v in args.items() if k not in ("profiles_dirs", "spec")
            )
            return ActivityItem(ts, client, f"{ev.get('op', '?')} {shown}".strip(), "info", foreign)
        if t == "command.refused":
            return ActivityItem(
                ts,
                client,
                f"refused {ev.get('op', '?')}: {ev.get('reason', '')}",
                "warning",
                foreign,
            )
        if t == "slot.state":
            st = ev.get("state")
            level = "error" if st in ("failed", "crashed") else "info"
            text = f"slot {ev.get('slot')}: {st}"
            cause = ev.get("cause") or {}
            if cause.get("summary"):
                text += f" ({cause['summary']})"
            elif ev.get("reason"):
                text += f" ({ev['reason']})"
            return ActivityItem(ts, client, text, level, False)
        if t == "swap.done":
            total = (ev.get("timings_s") or {}).get("total")
            verdict = (
                "done" if ev.get("ok") else ("rolled back" if ev.get("rolled_back") else "failed")
            )
            extra = f" in {units.span(total)}" if isinstance(total, (int, float)) else ""
            return ActivityItem(
                ts,
                client,
                f"swap {ev.get('from')} -> {ev.get('to')} {verdict}{extra}",
                "info" if ev.get("ok") else "error",
                False,
            )
        if t in ("bench.start", "bench.done"):
            return ActivityItem(
                ts, client, f"{t.replace('.', ' ')} {ev.get('run_id', '')}".strip(), "info", foreign
            )
        if t == "disk.error":
            return ActivityItem(
                ts, client, f"session disk error: {ev.get('error', '')}", "error", False
            )
        if t in ("agent.start", "agent.stop", "agent.adopt"):
            return ActivityItem(ts, client, t.replace(".", " "), "info", False)
        return None


def load_history(
    model: TuiModel, timeline: dict[str, Any], events: list[dict[str, Any]]
) -> set[str]:
    """Fill a freshly connected model with what the agent holds from before: the chart series
    (`timeline` op: {"series": {"engine.0.<key>": [[ts, value], ...]}}) and the Activity
    items of recent session events. Returns the areas to redraw."""
    changed: set[str] = set()
    series = (timeline or {}).get("series") or {}
    points: dict[float, dict[str, float]] = {}
    for name, key in SERIES.items():
        for item in series.get(f"engine.0.{key}") or []:
            if isinstance(item, (list, tuple)) and len(item) == 2 and item[1] is not None:
                points.setdefault(float(item[0]), {})[name] = float(item[1])
    if points:
        for values in model.series.values():
            values.clear()
        for ts in sorted(points):
            for name in SERIES:
                model.series[name].append((ts, points[ts].get(name, 0.0)))
        model._last_sample_ts = max(points)
        changed.add(CHART)
    if events and not model.swaps:
        for ev in events:
            if ev.get("type") == "swap.done" and model._add_swap(protocol.decode_event(ev)):
                changed.add(CHART)
    if events and not model.activity:
        for ev in events:
            item = model._activity_item(ev)
            if item is not None:
                model.activity.append(item)
                model.activity_total += 1
        changed.add(ACTIVITY)
    return changed
