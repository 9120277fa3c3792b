"""Rebuild what the agent would have said at any moment of a recorded session (pure, no I/O
beyond reading the session once).

`Replay.status_at(t)` gives a STATUS dict (sgltui/protocol/) as of time t: slots from the
events, telemetry from the last sample, bench runs, disk state. `pushes_between(t0, t1)` gives
the event/sample/log pushes the agent would have sent in (t0, t1], in time order, so a viewer
moving forward in small steps sees the same stream it saw live. Seeking backwards is a rebuild:
the viewer starts again from `status_at(t)` and `window(t)`.

Events are applied from checkpoints (every CHECKPOINT_EVERY events), so seeking anywhere in a
week-long session costs at most that many event applications.
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sgltui import protocol
from sgltui.core import units
from sgltui.core.redact import Redactor
from sgltui.session.jsonl import TextLineIndex
from sgltui.session.reader import Session, load_session

CHECKPOINT_EVERY = 500
CHART_WINDOW_S = 300.0  # the throughput pane shows the last 5 minutes
ACTIVITY_BACKLOG = 200  # events replayed into the activity pane after a seek
LOG_BACKLOG = 200  # log lines shown after a seek

_LOG_TS = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?")


def _new_slot(slot_id: str) -> dict[str, Any]:
    return _slot_status(protocol.SlotView(id=slot_id))


def _slot_status(slot: protocol.SlotView) -> dict[str, Any]:
    """A folded slot in the shape of the agent's STATUS (uptime filled in by status_at)."""
    return {**protocol.slot_dict(slot), "uptime_s": None}


def relocate_bench_path(ev: dict[str, Any], session_dir: Path) -> str | None:
    """The bench result file inside *this* copy of the session (it may have been moved)."""
    run_id = ev.get("run_id")
    candidates = []
    if ev.get("path"):
        candidates.append(session_dir / "bench" / Path(str(ev["path"])).name)
    if run_id:
        candidates.append(session_dir / "bench" / f"{run_id}.json")
    for c in candidates:
        if c.exists():
            return str(c)
    return str(candidates[0]) if candidates else None


def parse_log_ts(line: str) -> float | None:
    """The local-time stamp SGLang puts at the start of its lines, as a unix time."""
    m = _LOG_TS.match(line)
    if not m:
        return None
    try:
        base = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))
    except (ValueError, OverflowError):
        return None
    frac = float("0." + m.group(2)) if m.group(2) else 0.0
    return base + frac


class _LaunchLog:
    """One server log, indexed by time (lines read from disk on demand, redacted on read)."""

    def __init__(
        self, launch_id: str, slot: str, path: Path, launch_ts: float, redactor: Redactor
    ) -> None:
        self.launch_id = launch_id
        self.slot = slot
        self.index = TextLineIndex(path, parse_log_ts, launch_ts)
        self.ts = self.index.ts
        self._redactor = redactor

    def upto(self, t: float) -> int:
        return bisect.bisect_right(self.ts, t)

    def lines(self, a: int, b: int) -> list[str]:
        return [self._redactor.text(x) for x in self.index.lines(a, b)]


class Replay:
    """A recorded session, seekable. Build with :meth:`open` (reads the directory once)."""

    def __init__(self, session: Session, redactor: Redactor | None = None) -> None:
        self.session = session
        self.path = session.path
        self.redactor = redactor or Redactor()
        self.events = [e for e in session.events if isinstance(e.get("ts"), (int, float))]
        for ev in self.events:  # server logs on disk are already scrubbed; this is belt and braces
            if isinstance(ev.get("command"), list):
                self.redactor.argv(ev["command"])
        self.event_ts = [float(e["ts"]) for e in self.events]
        self.samples = session.timeline  # JsonlIndex: sorted, read on demand
        self.sample_ts = self.samples.ts
        stamps = (
            self.event_ts[:1]
            + self.event_ts[-1:]
            + list(self.sample_ts[:1])
            + list(self.sample_ts[-1:])
        )
        self.start = min(stamps) if stamps else 0.0
        self.end = max(stamps) if stamps else 0.0
        # Events folded by the one reducer (sgltui/protocol/); its states share what an event
        # does not change, so a checkpoint is a reference, not a copy.
        self._decoded = [protocol.decode_event(e) for e in self.events]
        self._checkpoints: list[tuple[int, protocol.SessionState]] = []
        self._build_checkpoints()
        self.logs: dict[str, _LaunchLog] = {}
        self._load_logs()

    @classmethod
    def open(cls, path: Path) -> Replay:
        return cls(load_session(Path(path)))

    @property
    def duration(self) -> float:
        return self.end - self.start

    def clamp(self, t: float) -> float:
        return min(max(t, self.start), self.end)

    # -- building ------------------------------------------------------------------------------
    def _build_checkpoints(self) -> None:
        state = protocol.SessionState()
        self._checkpoints.append((0, state))
        for i, ev in enumerate(self._decoded, 1):
            state = protocol.apply(state, ev)
            if i % CHECKPOINT_EVERY == 0:
                self._checkpoints.append((i, state))

    def _load_logs(self) -> None:
        for ev in self.events:
            if ev.get("type") != "launch" or not ev.get("launch_id"):
                continue
            lid = str(ev["launch_id"])
            self.logs[lid] = _LaunchLog(
                lid,
                str(ev.get("slot") or "0"),
                self.session.server_log(lid),
                float(ev["ts"]),
                self.redactor,
            )

    def _state_at(self, t: float) -> protocol.SessionState:
        n = bisect.bisect_right(self.event_ts, t)
        idx = bisect.bisect_right([c[0] for c in self._checkpoints], n) - 1
        start, state = self._checkpoints[idx]
        return protocol.fold(self._decoded[start:n], state)

    def _bench_runs(self, state: protocol.SessionState) -> list[dict[str, Any]]:
        out = []
        for run in state.bench.values():
            b = protocol.to_builtins(run)
            if run.state != protocol.BenchState.RUNNING or run.path:
                b["path"] = relocate_bench_path({"run_id": run.run_id, "path": run.path}, self.path)
            out.append({k: v for k, v in b.items() if v is not None})
        return out

    # -- queries -------------------------------------------------------------------------------
    def sample_at(self, t: float) -> dict[str, Any] | None:
        i = bisect.bisect_right(self.sample_ts, t)
        return self.samples[i - 1] if i else None

    def status_at(self, t: float) -> dict[str, Any]:
        """STATUS as of time t (the agent's `status` op at that moment)."""
        state = self._state_at(t)
        sample = self.sample_at(t) or {}
        slots = []
        for slot in sorted(state.slots.values(), key=lambda s: s.id):
            s = _slot_status(slot)
            if s["state"] == "ready" and s.get("ready_at"):
                s["uptime_s"] = max(0.0, t - s["ready_at"])
            elif s.get("started_at") and s["state"] in ("launching", "draining", "stopping"):
                s["uptime_s"] = max(0.0, t - s["started_at"])
            s["command"] = self.redactor.argv(s.get("command") or [])
            slots.append(s)
        if not slots:
            slots.append(_new_slot("0"))
        running_bench = [b for b in self._bench_runs(state) if b.get("state") == "running"]
        return {
            "agent": {
                "pid": state.agent.pid,
                "version": state.agent.version,
                "started": state.agent.started,
                "state_dir": str(self.path.parent.parent),
                "session_dir": str(self.path),
                "disk": protocol.to_builtins(state.disk),
                "replay": {"t": t, "start": self.start, "end": self.end},
            },
            "slots": slots,
            "profiles": [protocol.to_builtins(p) for p in state.profiles.values()],
            "telemetry": {
                "ts": sample.get("ts", t),
                "gpus": sample.get("gpus") or [],
                "gpu_source": {"kind": "none", "message": "replay of a recorded session"},
                "host": sample.get("host") or {},
                "engine": sample.get("engine") or {},
            },
            "bench": running_bench[-1] if running_bench else None,
        }

    def bench_runs_at(self, t: float) -> list[dict[str, Any]]:
        """The agent's `bench_list` as of t."""
        return self._bench_runs(self._state_at(t))

    def events_between(self, t0: float, t1: float) -> list[dict[str, Any]]:
        a = bisect.bisect_right(self.event_ts, t0)
        b = bisect.bisect_right(self.event_ts, t1)
        return [self._public_event(e) for e in self.events[a:b]]

    def samples_between(self, t0: float, t1: float) -> list[dict[str, Any]]:
        a = bisect.bisect_right(self.sample_ts, t0)
        b = bisect.bisect_right(self.sample_ts, t1)
        return self.samples.slice(a, b)

    def _public_event(self, ev: dict[str, Any]) -> dict[str, Any]:
        if ev.get("type") == "bench.done":
            ev = dict(ev, path=relocate_bench_path(ev, self.path))
        return ev

    def log_lines_between(self, t0: float, t1: float) -> list[dict[str, Any]]:
        """`log` pushes for lines written in (t0, t1], one push per launch."""
        out = []
        for log in self.logs.values():
            a, b = log.upto(t0), log.upto(t1)
            if b > a:
                out.append(
                    {
                        "slot": log.slot,
                        "launch_id": log.launch_id,
                        "lines": log.lines(a, b),
                        "ts": log.ts[b - 1],
                    }
                )
        out.sort(key=lambda p: float(p["ts"]))  # type: ignore[arg-type]
        return out

    def log_tail(
        self, slot: str, t: float, n: int = LOG_BACKLOG, launch_id: str | None = None
    ) -> list[str]:
        """The agent's `logs` op at time t: the last n lines of the slot's current launch."""
        if launch_id is None:
            folded = self._state_at(t).slots.get(slot)
            launch_id = folded.launch_id if folded else None
        log = self.logs.get(str(launch_id)) if launch_id else None
        if log is None:
            return []
        end = log.upto(t)
        return log.lines(max(0, end - n), end)

    def pushes_between(self, t0: float, t1: float) -> list[dict[str, Any]]:
        """Every push the agent sent in (t0, t1], in time order (events before samples on ties)."""
        items: list[tuple[float, int, dict[str, Any]]] = []
        for ev in self.events_between(t0, t1):
            items.append((float(ev["ts"]), 0, {"push": "event", "data": ev}))
        for s in self.samples_between(t0, t1):
            items.append((float(s["ts"]), 1, {"push": "sample", "data": s}))
        for p in self.log_lines_between(t0, t1):
            ts = p.pop("ts")
            items.append((ts, 2, {"push": "log", "data": p}))
        items.sort(key=lambda x: (x[0], x[1]))
        return [x[2] for x in items]

    def window(self, t: float, seconds: float = CHART_WINDOW_S) -> list[dict[str, Any]]:
        """Pushes that rebuild a viewer after a seek: the last `seconds` of samples and the last
        ACTIVITY_BACKLOG events up to t (the chart and the activity pane have history)."""
        a = bisect.bisect_right(self.event_ts, t)
        events = [
            {"push": "event", "data": self._public_event(e)}
            for e in self.events[max(0, a - ACTIVITY_BACKLOG) : a]
        ]
        samples = [{"push": "sample", "data": s} for s in self.samples_between(t - seconds, t)]
        return events + samples

    def event_times(self, types: Iterable[str] | None = None) -> list[float]:
        """Times of notable events (for "jump to next event")."""
        wanted = set(types) if types else None
        return [float(e["ts"]) for e in self.events if wanted is None or e.get("type") in wanted]


class SeekError(ValueError):
    """A seek target that cannot be understood; the message says which forms work."""


_SEEK_HELP = (
    "use +30, -2m, 1:30 or +1:30 (from the start), 50%, 15:04:05 (clock time), start or end"
)
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_seek(text: str, now: float, start: float, end: float) -> float:
    """Where a typed seek target points, as a unix time clamped to [start, end].

    ``+30`` / ``-2m``: relative to the cursor; ``90`` / ``1:30`` / ``1:02:03``: offset from the
    start; ``50%``: fraction of the session; ``15:04:05`` with a clock time inside the session
    (or ``@15:04``): that local time; ``start`` / ``end``."""
    s = text.strip().lower()
    if not s:
        raise SeekError(f"empty seek target; {_SEEK_HELP}")

    def clamp(t: float) -> float:
        return min(max(t, start), end)

    if s in ("start", "begin", "home", "0"):
        return start
    if s in ("end", "last"):
        return end
    # "+1:40" is a position as the replay bar prints it ("+1:44 / 4:20"): from the start.
    m = re.fullmatch(r"\+\s*(\d+):(\d{2})(?::(\d{2}))?", s)
    if m:
        a, b, c = int(m.group(1)), int(m.group(2)), m.group(3)
        offset = a * 3600 + b * 60 + int(c) if c is not None else a * 60 + b
        return clamp(start + offset)
    m = re.fullmatch(r"([+-])\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?", s)
    if m:
        delta = float(m.group(2)) * _UNIT[m.group(3) or ""]
        return clamp(now + delta if m.group(1) == "+" else now - delta)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%", s)
    if m:
        return clamp(start + (end - start) * float(m.group(1)) / 100.0)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|min|h)?", s)
    if m:
        return clamp(start + float(m.group(1)) * _UNIT[m.group(2) or ""])
    clock = s[1:] if s.startswith("@") else s
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", clock)
    if m:
        a, b, c = int(m.group(1)), int(m.group(2)), m.group(3)
        # A clock time of a day the session covers wins over an offset when it fits (or with @).
        for day_start in _days(start, end):
            candidate = day_start + a * 3600 + b * 60 + (int(c) if c else 0)
            if start - 1 <= candidate <= end + 1 and (s.startswith("@") or c is not None):
                return clamp(candidate)
        if s.startswith("@"):
            raise SeekError(
                f"{text.strip()} is outside the session ({units.clock(start)} to {units.clock(end)})"
            )
        offset = (a * 3600 + b * 60 + int(c)) if c is not None else (a * 60 + b)
        return clamp(start + offset)
    raise SeekError(f"cannot read {text.strip()!r}; {_SEEK_HELP}")


def _days(start: float, end: float) -> list[float]:
    out: list[float] = []
    lt = time.localtime(start)
    day = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
    while day <= end and len(out) < 400:
        out.append(day)
        lt = time.localtime(day + 86400 + 3600)  # +1 h: DST-safe step to the next day
        day = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
    return out
