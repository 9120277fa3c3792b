"""Rebuild what the agent would have said at any moment of a recorded session (pure, no I/O
beyond reading the session once).

`Replay.status_at(t)` gives a STATUS dict (docs/CONTRACTS.md) as of time t: slots from the
events, telemetry from the last sample, bench runs, disk state. `pushes_between(t0, t1)` gives
the event/sample/log pushes the agent would have sent in (t0, t1], in time order, so a viewer
moving forward in small steps sees the same stream it saw live. Seeking backwards is a rebuild:
the viewer starts again from `status_at(t)` and `window(t)`.

Events are applied from checkpoints (every CHECKPOINT_EVERY events), so seeking anywhere in a
week-long session costs at most that many event applications.
"""

from __future__ import annotations

import bisect
import copy
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgltui.core.launch_secrets import FILE_PREFIX
from sgltui.core.redact import Redactor
from sgltui.session.jsonl import TextLineIndex
from sgltui.session.reader import Session, load_session

CHECKPOINT_EVERY = 500
CHART_WINDOW_S = 300.0  # the throughput pane shows the last 5 minutes
ACTIVITY_BACKLOG = 200  # events replayed into the activity pane after a seek
LOG_BACKLOG = 200  # log lines shown after a seek

_LOG_TS = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?")


def _new_slot(slot_id: str) -> dict[str, Any]:
    return {
        "id": slot_id,
        "profile": None,
        "state": "stopped",
        "phase": None,
        "progress": None,
        "eta_s": None,
        "host": "127.0.0.1",
        "port": None,
        "pid": None,
        "pids": [],
        "launch_id": None,
        "log_path": None,
        "started_at": None,
        "ready_at": None,
        "uptime_s": None,
        "command": [],
        "command_hash": None,
        "cause": None,
        "capacity": None,
        "swap": None,
        "api_key_set": False,
    }


def _flag(argv: list[Any], name: str) -> str | None:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return str(argv[i + 1])
        if isinstance(word, str) and word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


@dataclass
class _State:
    """What the events up to some index say: slots, profiles seen, bench runs, disk."""

    slots: dict[str, dict[str, Any]]
    profiles: dict[str, dict[str, Any]]
    bench: dict[str, dict[str, Any]]
    disk: dict[str, Any]
    agent: dict[str, Any]

    @classmethod
    def empty(cls) -> _State:
        return cls({}, {}, {}, {"ok": True, "error": None}, {})

    def copy(self) -> _State:
        return copy.deepcopy(self)

    def apply(self, ev: dict[str, Any], session_dir: Path) -> None:
        t = ev.get("type")
        ts = ev.get("ts")
        slot_id = ev.get("slot")
        slot = None
        if slot_id is not None:
            slot = self.slots.setdefault(str(slot_id), _new_slot(str(slot_id)))
        if t in ("agent.start", "agent.adopt"):
            if t == "agent.start":
                self.agent.update(
                    {k: ev.get(k) for k in ("pid", "version") if ev.get(k) is not None}
                )
                self.agent["started"] = ts
            if t == "agent.adopt" and slot is not None and ev.get("profile"):
                slot.update(
                    profile=ev.get("profile"), launch_id=ev.get("launch_id") or slot["launch_id"]
                )
                if ev.get("ok") and ev.get("state"):
                    slot["state"] = ev["state"]
        elif t == "launch" and slot is not None:
            command = ev.get("command") if isinstance(ev.get("command"), list) else []
            port = _flag(command, "--port")
            slot.update(
                profile=ev.get("profile"),
                launch_id=ev.get("launch_id"),
                command=command,
                command_hash=ev.get("command_hash"),
                log_path=ev.get("log_path"),
                started_at=ts,
                ready_at=None,
                pid=ev.get("pid"),
                pids=[ev["pid"]] if ev.get("pid") else [],
                capacity=None,
                cause=None,
                host=_flag(command, "--host") or "127.0.0.1",
                port=int(port) if port and port.isdigit() else 30000,
                # Keys travel in sgltui's --config secrets file (launch_secrets.py), not argv.
                api_key_set=_flag(command, "--api-key") is not None
                or FILE_PREFIX in (_flag(command, "--config") or ""),
            )
            self._profile(ev.get("profile"))
        elif t == "slot.state" and slot is not None:
            state = ev.get("state") or slot["state"]
            slot["state"] = state
            slot["phase"] = ev.get("phase") if state == "launching" else None
            if ev.get("profile"):
                slot["profile"] = ev["profile"]
            if "cause" in ev or state in ("launching", "ready", "stopped"):
                slot["cause"] = ev.get("cause")
            if state == "ready":
                slot["ready_at"] = ts
                slot["progress"], slot["eta_s"] = None, None
            if state in ("stopped", "failed", "crashed"):
                slot["pid"], slot["pids"] = None, []
        elif t == "slot.phase" and slot is not None:
            for k in ("phase", "progress", "eta_s"):
                if k in ev:
                    slot[k] = ev[k]
        elif t == "swap.step" and slot is not None:
            started = (slot.get("swap") or {}).get("started_at")
            if started is None and isinstance(ts, (int, float)):
                started = ts - float(ev.get("elapsed_s") or 0.0)
            slot["swap"] = {
                "from": ev.get("from"),
                "to": ev.get("to"),
                "step": ev.get("step"),
                "started_at": started,
            }
            self._profile(ev.get("from"))
            self._profile(ev.get("to"))
        elif t == "swap.done" and slot is not None:
            slot["swap"] = None
        elif t == "capacity" and slot is not None:
            slot["capacity"] = ev.get("card")
        elif t == "bench.start" and ev.get("run_id"):
            self.bench[ev["run_id"]] = {"run_id": ev["run_id"], "state": "running", "started": ts}
        elif t == "bench.progress" and ev.get("run_id"):
            run = self.bench.setdefault(ev["run_id"], {"run_id": ev["run_id"], "state": "running"})
            run["progress"] = {
                k: v for k, v in ev.items() if k not in ("v", "ts", "type", "client", "slot")
            }
        elif t == "bench.done" and ev.get("run_id"):
            run = self.bench.setdefault(ev["run_id"], {"run_id": ev["run_id"]})
            run["state"] = ev.get("state") or (
                "failed" if ev.get("ok") is False or ev.get("error") else "done"
            )
            run["path"] = relocate_bench_path(ev, session_dir)
        elif t == "disk.error":
            self.disk = {"ok": False, "error": ev.get("error")}
        elif t == "disk.ok":
            self.disk = {"ok": True, "error": None}

    def _profile(self, name: Any) -> None:
        if name and name not in self.profiles:
            self.profiles[str(name)] = {
                "name": str(name),
                "key": None,
                "description": "",
                "launcher": None,
            }


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
        self._checkpoints: list[tuple[int, _State]] = []
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
        state = _State.empty()
        self._checkpoints.append((0, state.copy()))
        for i, ev in enumerate(self.events, 1):
            state.apply(ev, self.path)
            if i % CHECKPOINT_EVERY == 0:
                self._checkpoints.append((i, state.copy()))

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

    def _state_at(self, t: float) -> _State:
        n = bisect.bisect_right(self.event_ts, t)
        idx = bisect.bisect_right([c[0] for c in self._checkpoints], n) - 1
        start, base = self._checkpoints[idx]
        state = base.copy()
        for ev in self.events[start:n]:
            state.apply(ev, self.path)
        return state

    # -- queries -------------------------------------------------------------------------------
    def sample_at(self, t: float) -> dict[str, Any] | None:
        i = bisect.bisect_right(self.sample_ts, t)
        return self.samples[i - 1] if i else None

    def status_at(self, t: float) -> dict[str, Any]:
        """STATUS as of time t (the agent's `status` op at that moment)."""
        state = self._state_at(t)
        sample = self.sample_at(t) or {}
        slots = []
        for slot in sorted(state.slots.values(), key=lambda s: s["id"]):
            s = dict(slot)
            if s["state"] == "ready" and s.get("ready_at"):
                s["uptime_s"] = max(0.0, t - s["ready_at"])
            elif s.get("started_at") and s["state"] in ("launching", "draining", "stopping"):
                s["uptime_s"] = max(0.0, t - s["started_at"])
            s["command"] = self.redactor.argv(s.get("command") or [])
            slots.append(s)
        if not slots:
            slots.append(_new_slot("0"))
        running_bench = [b for b in state.bench.values() if b.get("state") == "running"]
        return {
            "agent": {
                "pid": state.agent.get("pid"),
                "version": state.agent.get("version"),
                "started": state.agent.get("started"),
                "state_dir": str(self.path.parent.parent),
                "session_dir": str(self.path),
                "disk": dict(state.disk),
                "replay": {"t": t, "start": self.start, "end": self.end},
            },
            "slots": slots,
            "profiles": list(state.profiles.values()),
            "telemetry": {
                "ts": sample.get("ts", t),
                "gpus": sample.get("gpus") or [],
                "gpu_source": {"kind": "none", "message": "replay of a recorded session"},
                "host": sample.get("host") or {},
                "engine": sample.get("engine") or {},
            },
            "bench": dict(running_bench[-1]) if running_bench else None,
        }

    def bench_runs_at(self, t: float) -> list[dict[str, Any]]:
        """The agent's `bench_list` as of t."""
        return [dict(b) for b in self._state_at(t).bench.values()]

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
        out.sort(key=lambda p: p["ts"])
        return out

    def log_tail(
        self, slot: str, t: float, n: int = LOG_BACKLOG, launch_id: str | None = None
    ) -> list[str]:
        """The agent's `logs` op at time t: the last n lines of the slot's current launch."""
        if launch_id is None:
            launch_id = (self._state_at(t).slots.get(slot) or {}).get("launch_id")
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
                f"{text.strip()} is outside the session ({_fmt_clock(start)} to {_fmt_clock(end)})"
            )
        offset = (a * 3600 + b * 60 + int(c)) if c is not None else (a * 60 + b)
        return clamp(start + offset)
    raise SeekError(f"cannot read {text.strip()!r}; {_SEEK_HELP}")


def _days(start: float, end: float) -> list[float]:
    out = []
    lt = time.localtime(start)
    day = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
    while day <= end and len(out) < 400:
        out.append(day)
        lt = time.localtime(day + 86400 + 3600)  # +1 h: DST-safe step to the next day
        day = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1))
    return out


def _fmt_clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))
