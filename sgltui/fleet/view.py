"""The merged view of several hosts: one row per host, slots addressed `host/slot`.

Pure: built from each host's latest STATUS (or why it has none), so the TUI, `fleet status`
and the tests share one reading.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sgltui import protocol


@dataclass
class HostState:
    """What one host's link knows: reachable or since when not, and its latest STATUS."""

    name: str
    ssh: str = ""
    reachable: bool = False
    since: float | None = None  # connected since, or unreachable since
    error: str | None = None
    status: protocol.StatusReply | None = None
    next_retry: float | None = None  # unix time of the next attempt while unreachable
    rtt_ms: float | None = None  # the latest status round trip
    polls: int = 0  # STATUS answers received (changed or not)
    retrying: bool = True  # a link tries again; a one-shot question (fleet status) does not

    def line(self) -> str:
        """'reachable' or 'unreachable since 14:02, retrying'."""
        if self.reachable:
            return "reachable"
        if self.since is None:
            return "connecting"
        since = time.strftime("%H:%M", time.localtime(self.since))
        return f"unreachable since {since}, retrying" if self.retrying else f"unreachable ({since})"

    def down_line(self) -> str:
        """'unreachable since 14:02' (what a down host's slots say in the slots view)."""
        if self.since is None:
            return "connecting"
        return f"unreachable since {time.strftime('%H:%M', time.localtime(self.since))}"


@dataclass
class HostRow:
    name: str
    reachable: bool
    state: str
    error: str | None
    version: str | None
    gpus: int | None
    slots: int | None
    running: int | None
    tok_s: float | None
    rtt_ms: float | None
    slot_rows: list[dict[str, Any]] = field(default_factory=list)


def host_row(h: HostState) -> HostRow:
    st = h.status if h.reachable else None
    if st is None:
        return HostRow(h.name, h.reachable, h.line(), h.error, None, None, None, None, None, None)
    tel = st.telemetry
    engine = tel.engine
    tok = 0.0
    seen = False
    for e in engine.values():
        v = e.get("gen_throughput") if isinstance(e, dict) else None
        if isinstance(v, (int, float)):
            tok += float(v)
            seen = True
    live = (protocol.SlotState.LAUNCHING, protocol.SlotState.READY, protocol.SlotState.DRAINING)
    slot_rows = [
        {
            "id": f"{h.name}/{s.id}",
            "host": h.name,
            "slot": s.id,
            "profile": s.profile,
            "state": str(s.state.value if hasattr(s.state, "value") else s.state),
            "port": s.port,
        }
        for s in st.slots
    ]
    return HostRow(
        name=h.name,
        reachable=True,
        state=h.line(),
        error=None,
        version=st.agent.version,
        gpus=len(tel.gpus),
        slots=len(st.slots),
        running=sum(1 for s in st.slots if s.state in live),
        tok_s=round(tok, 1) if seen else None,
        rtt_ms=round(h.rtt_ms, 2) if h.rtt_ms is not None else None,
        slot_rows=slot_rows,
    )


def pool_rows(h: HostState) -> list[dict[str, Any]]:
    """The pools whose endpoint this host serves (JSON values): host.toml's, and fleet.toml's
    pools across hosts whose gateway runs here."""
    if not h.reachable or h.status is None:
        return []
    return [protocol.to_builtins(p) for p in h.status.pools]


def host_json(h: HostState) -> dict[str, Any]:
    """One host of `fleet status --json` (and a line of `--json-lines`)."""
    r = host_row(h)
    return {
        "name": r.name,
        "ssh": h.ssh,
        "reachable": r.reachable,
        "state": r.state,
        "since": h.since,
        "error": r.error,
        "version": r.version,
        "gpus": r.gpus,
        "slots": r.slot_rows if r.reachable else [],
        "running": r.running,
        "tok_s": r.tok_s,
        "rtt_ms": r.rtt_ms,
        "pools": pool_rows(h),
    }


def as_json(states: list[HostState]) -> dict[str, Any]:
    """`fleet status --json`: {"hosts": [{"name", "reachable", ...}]}."""
    return {"hosts": [host_json(h) for h in states]}


# ---- many hosts: one line each, the failing and the busiest first, filtered by words -------

_FAILING = (protocol.SlotState.FAILED, protocol.SlotState.CRASHED)


@dataclass(frozen=True)
class HostSummary:
    """What a summarised host's line says (a fleet of many hosts: its slots only when opened)."""

    name: str
    reachable: bool
    state: str  # "reachable", "unreachable since 14:02, retrying", "connecting"
    gpus: int = 0
    slots: int = 0
    running: int = 0
    failing: int = 0  # slots failed or crashed
    tok_s: float | None = None
    words: str = ""  # what a filter matches: name, state, profiles, slot states (lower case)


def summary(h: HostState) -> HostSummary:
    st = h.status if h.reachable else None
    if st is None:
        words = f"{h.name} {h.ssh} {h.line()} down {h.error or ''}".lower()
        return HostSummary(h.name, False, h.line(), words=words)
    live = (protocol.SlotState.LAUNCHING, protocol.SlotState.READY, protocol.SlotState.DRAINING)
    tok, seen = 0.0, False
    for e in st.telemetry.engine.values():
        v = e.get("gen_throughput") if isinstance(e, dict) else None
        if isinstance(v, (int, float)):
            tok, seen = tok + float(v), True
    failing = sum(1 for s in st.slots if s.state in _FAILING)
    profiles = {s.profile for s in st.slots if s.profile}
    states = {str(s.state) for s in st.slots}
    extra = " failing" if failing else ""
    words = " ".join([h.name, h.ssh, "reachable up", *sorted(profiles), *sorted(states)]) + extra
    return HostSummary(
        name=h.name,
        reachable=True,
        state=h.line(),
        gpus=len(st.telemetry.gpus),
        slots=len(st.slots),
        running=sum(1 for s in st.slots if s.state in live),
        failing=failing,
        tok_s=round(tok, 1) if seen else None,
        words=words.lower(),
    )


def rank(s: HostSummary) -> tuple:
    """The failing first (down, then a failed slot), then the busiest (tok/s to the hundred,
    so that rows do not trade places on every sample; running slots), then by name."""
    worst = 0 if not s.reachable else 1 if s.failing else 2
    return (worst, -round(s.tok_s or 0.0, -2), -s.running, s.name)


def matches(s: HostSummary, query: str) -> bool:
    """Every word of `query` is in the host's words (its name, state, profiles, slot states)."""
    return all(w in s.words for w in query.lower().split())
