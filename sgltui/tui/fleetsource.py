"""The app's source for a fleet (fleet.toml): every host's agent, over its own ssh link, seen as
one agent whose slots are named `host/slot` and whose pools `host/pool`.

Each host is a HostLink (sgltui/fleet/link.py): its own asyncio task that waits only on ssh's
pipes and timers, polls STATUS and reconnects with backoff, so a slow or dead host never holds
up the loop or another host. Once a host answers, its connection is subscribed to the agent's
pushes too (logs, events, samples); they come back here with their slot names prefixed.

No host holds up another or the app: `snapshot()` (called by the app's workers) asks every
reachable host for its STATUS at once and gives a host that is slow its link's latest; a call
goes to the one host it names (a slot `h2/a`, a pool `h2/all`), or to the host of the slot the
operator follows (`focus_host`); a host that is down refuses at once with one line. Samples of all hosts are merged into at most one a second, so
an idle fleet of four hosts draws as often as one host.

A host that goes down keeps its last slots and pools in the snapshot (the app draws them as
unreachable, `unreachable()`; they come back afresh when the host answers). A swap or start of
a fleet.toml pool across hosts (named `gateway/pool`) runs here, not on an agent: fleetpools.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from sgltui import protocol
from sgltui.client import AgentError, client_id
from sgltui.client.errors import Unavailable
from sgltui.fleet.view import HostState
from sgltui.tui.fleetpools import CrossPools

SEP = "/"
# A fleet of up to this many hosts shows every host's slots (the slots view lists them all, each
# host's pushes followed). More: the hosts are summarised one line each and a host's slots,
# figures and pushes are fetched only while it is opened (docs/scale.md).
OPEN_ALL_MAX = 8
# A summarised fleet's links poll this often (an opened host's figures come by its pushes, at
# the agent's rate), and lines that changed are drawn together at most this often (their
# figures are up to 5 s old anyway); a host that goes down or comes back is drawn at once.
SUMMARY_POLL_S = 5.0
SUMMARY_DRAW_S = 2.0
SAMPLE_MERGE_S = 1.0  # every host's samples, drawn as one at most this often
LOG_TAIL_LINES = 200
FRESH_TIMEOUT_S = 2.0  # a STATUS the app asks for: a host slower than this gives its last one  # a host that (re)connects: the tail of each live server's log
# Ops that speak of one slot or pool by name: their `slot`/`pool` argument names the host.
_SLOT_ARGS = ("slot", "pool")


class Link(Protocol):
    """What the source needs of a host's link (sgltui.fleet.link.HostLink; tests: a fake)."""

    state: HostState
    interval_s: float  # seconds between its STATUS polls
    client: Any  # a HostClient while connected (call, agent.pushes), else None
    on_change: Callable[[HostState], None] | None

    async def run(self) -> None: ...
    def poke(self) -> None: ...
    async def detail_client(self) -> Any: ...


def split(name: str) -> tuple[str, str]:
    """'h2/a' -> ('h2', 'a'); a name without a host: ('', name)."""
    host, sep, rest = name.partition(SEP)
    return (host, rest) if sep else ("", name)


def host_of(name: str | None) -> str | None:
    return split(name)[0] or None if name else None


def _prefixed(host: str, value: Any) -> Any:
    return f"{host}{SEP}{value}" if isinstance(value, str) and value else value


def status_of(host: str, status: protocol.StatusReply) -> dict[str, Any]:
    """A host's STATUS as plain data, every slot and pool named host/..."""
    st = protocol.to_builtins(status)
    for s in st.get("slots") or []:
        s["id"] = _prefixed(host, s.get("id"))
    for p in st.get("pools") or []:
        p["name"] = _prefixed(host, p.get("name"))
        if p.get("across_hosts"):
            continue  # a fleet.toml pool's gateway: its slots are host/slot already
        p["slots"] = [_prefixed(host, sid) for sid in p.get("slots") or []]
        for w in p.get("workers") or []:
            w["slot"] = _prefixed(host, w.get("slot"))
    st["telemetry"] = telemetry_of(host, st.get("telemetry") or {})
    return st


def telemetry_of(host: str, tel: dict[str, Any]) -> dict[str, Any]:
    """A host's telemetry (STATUS's or a sample) with its GPUs tagged and its slots prefixed."""
    out = dict(tel)
    if "gpus" in tel:
        out["gpus"] = [
            {
                **g,
                "host": host,
                "server_bytes": {
                    _prefixed(host, k): v for k, v in (g.get("server_bytes") or {}).items()
                },
            }
            for g in tel.get("gpus") or []
            if isinstance(g, dict)
        ]
    if "engine" in tel:
        out["engine"] = {_prefixed(host, k): v for k, v in (tel.get("engine") or {}).items()}
    return out


def merge_telemetry(parts: dict[str, dict[str, Any]], focus: str | None) -> dict[str, Any]:
    """Every host's telemetry as one: all GPUs (each tagged with its host), every slot's engine
    figures; the host figures (CPU, RAM) are the focused host's."""
    gpus: list[dict[str, Any]] = []
    engine: dict[str, Any] = {}
    ts: float | None = None
    for tel in parts.values():
        gpus += tel.get("gpus") or []
        engine.update(tel.get("engine") or {})
        t = tel.get("ts")
        if isinstance(t, (int, float)):
            ts = t if ts is None else max(ts, t)
    out: dict[str, Any] = {"gpus": gpus, "engine": engine}
    if ts is not None:
        out["ts"] = ts
    mine = parts.get(focus or "") or next(iter(parts.values()), {})
    if "host" in mine:
        out["host"] = mine["host"]
    return out


def push_of(host: str, push: dict[str, Any]) -> dict[str, Any]:
    """An event or log push of a host with its slot and pool names prefixed."""
    data = push.get("data")
    if not isinstance(data, dict):
        return push
    data = dict(data)
    for key in _SLOT_ARGS:
        if key in data:
            data[key] = _prefixed(host, data[key])
    if isinstance(data.get("slots"), list):
        data["slots"] = [_prefixed(host, s) for s in data["slots"]]
    return {**push, "data": data}


class FleetSource:
    """The hosts of a fleet as one TuiSource (see the module's docstring)."""

    read_only = False
    read_only_label = "READ-ONLY"

    def __init__(self, links: list[Link], client_name: str = "tui", fleet: Any = None) -> None:
        self.links = links
        self.by_name = {lk.state.name: lk for lk in links}
        self.client_name = client_id(client_name)
        self.focus_host: str | None = None  # the host of the slot the operator follows
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        # fleet.toml's pools across hosts (`fleet`: its Fleet; None: no such pools)
        self.cross = CrossPools(fleet, self.by_name, self._queue.put_nowait, self._note_shown)
        self._tasks: list[asyncio.Task] = []
        self._followers: dict[str, tuple[Any, asyncio.Task]] = {}
        self._samples: dict[str, dict[str, Any]] = {}
        self._sample_due: asyncio.TimerHandle | None = None
        self._last_merge = 0.0
        self._fleet_pending = False
        # Many hosts: summarised, a host's detail (slots, samples, logs) only while opened, on a
        # connection of its own (the agent has no unsubscribe: closing it is what stops them).
        self.summarised = len(links) > OPEN_ALL_MAX
        self.opened: set[str] = set()
        self._shown_changed = False  # a host whose slots are shown changed since fleet_read
        self._up: dict[str, bool] = {}  # each host's reachability as last drawn
        self._lines_due: asyncio.TimerHandle | None = None
        self._last_lines = 0.0
        self._interval = {lk.state.name: lk.interval_s for lk in links}
        for lk in links:
            self._set_poll(lk)
            lk.on_change = self._changed

    @classmethod
    def from_fleet(
        cls, fleet: Any, interval_s: float = 2.0, client_name: str = "tui"
    ) -> FleetSource:
        from sgltui.fleet.link import HostLink

        links = [
            HostLink(fleet, h, interval_s=interval_s, client_name=client_name) for h in fleet.hosts
        ]
        return cls(list(links), client_name=client_name, fleet=fleet)

    # -- what the app reads ----------------------------------------------------------------

    @property
    def hosts(self) -> list[HostState]:
        return [lk.state for lk in self.links]

    def focused(self) -> str | None:
        """The host a command without a slot goes to: the followed slot's, else the first that
        answers."""
        if self.focus_host in self.by_name:
            return self.focus_host
        return next((lk.state.name for lk in self.links if lk.state.status is not None), None)

    def unreachable(self) -> dict[str, str]:
        """Each host that is down: 'unreachable since 14:02' (its last slots are drawn so)."""
        return {lk.state.name: lk.state.down_line() for lk in self.links if not lk.state.reachable}

    def refusal(self, host: str | None) -> str | None:
        """Why nothing can be sent to `host` (None: the focused one): it is down or not in the
        fleet. None: it can be."""
        host = host or self.focused()
        link = self.by_name.get(host or "")
        if link is None:
            known = ", ".join(self.by_name) or "none"
            return f"no host {host!r} in the fleet (hosts: {known})"
        if link.client is None or not link.state.reachable:
            return f"host {host}: {link.state.line()}; nothing sent"
        return None

    def is_open(self, host: str) -> bool:
        """Whether `host`'s slots are shown (every host's in a fleet that is not summarised)."""
        return not self.summarised or host in self.opened

    def _set_poll(self, link: Link) -> None:
        """In a summarised fleet every link polls every SUMMARY_POLL_S: a closed host's line
        needs no more, and an opened host is kept live by its pushes (samples each second, and
        each event pokes its link for a STATUS at once)."""
        if self.summarised:
            link.interval_s = max(self._interval[link.state.name], SUMMARY_POLL_S)

    def toggle(self, host: str) -> bool:
        """Open a host (its slots shown, its pushes followed) or close it; True: now open."""
        if not self.summarised or host not in self.by_name:
            return True
        if host in self.opened:
            self.opened.discard(host)
            followed = self._followers.pop(host, None)
            if followed is not None:
                followed[1].cancel()
            self._samples.pop(host, None)
            if self.focus_host == host:
                self.focus_host = None
        else:
            self.opened.add(host)
            self._changed(self.by_name[host].state)
        self.by_name[host].poke()  # (opened: its STATUS now, not at the end of a long nap)
        self._shown_changed = True
        self._note_fleet()
        return host in self.opened

    def retry_now(self) -> None:
        """Every host that is down tries again now (the operator asked), not after its backoff."""
        for lk in self.links:
            if not lk.state.reachable:
                lk.poke()

    async def connect(self) -> None:
        # The links connect by themselves, each in its own task: nothing here waits on a host.
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(lk.run()) for lk in self.links]
        for lk in self.links:
            self._changed(lk.state)  # a link that answered before the app asked

    async def snapshot(self) -> dict[str, Any]:
        """Every host's STATUS as one. Asked afresh of each reachable host at once (the app
        asks after an event: the link's latest poll may be seconds old and would undo what the
        event showed); a host that does not answer within FRESH_TIMEOUT_S gives its link's. A
        host that is down gives the slots and pools it last had (no figures: they are gone)."""
        hosts = [
            lk for lk in self.links if lk.state.status is not None and self.is_open(lk.state.name)
        ]
        fresh = await asyncio.gather(*(self._fresh(lk) for lk in hosts))
        focus = self.focused()
        slots: list[Any] = []
        pools: list[Any] = []
        tel: dict[str, dict[str, Any]] = {}
        mine: dict[str, Any] = {}
        for lk, status in zip(hosts, fresh, strict=True):
            h = lk.state
            st = status_of(h.name, status)
            slots += st.get("slots") or []
            pools += st.get("pools") or []
            if h.reachable:
                sample = self._samples.get(h.name)
                tel[h.name] = {**st["telemetry"], **(sample or {})}
            if h.name == focus:
                mine = st
        return {
            "agent": mine.get("agent") or {},
            "slots": slots,
            "pools": self.cross.rows(pools, {lk.state.name for lk in hosts}),
            "profiles": mine.get("profiles") or [],
            "telemetry": merge_telemetry(tel, focus),
            "bench": mine.get("bench"),
            "jobs": mine.get("jobs") or [],
        }

    async def _fresh(self, link: Link) -> protocol.StatusReply:
        cached = link.state.status
        assert cached is not None
        client = link.client
        if client is None or not link.state.reachable:
            return cached
        try:
            raw = await asyncio.wait_for(client.call("status"), FRESH_TIMEOUT_S)
            return protocol.decode_reply("status", raw)
        except (AgentError, OSError, asyncio.TimeoutError, protocol.ProtocolError):
            return cached  # the link says when the host is down; this reading is not the one

    async def pushes(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await self._queue.get()

    async def call(self, op: str, **args: Any) -> Any:
        if op == "status":
            return await self.snapshot()
        if op == "timeline":
            return {"series": {}}  # the chart starts with the fleet (history is per host)
        xp = self.cross.pool_named(args.get("pool")) if op in ("swap", "start") else None
        if xp is not None:  # a pool across hosts: rolled here, answered at once
            self.cross.start(op, xp, args.get("profile"), self.refusal)
            return {"slot": self._slot_of(*xp.slots[0]), "accepted": True}
        host = None
        for key in _SLOT_ARGS:
            value = args.get(key)
            if isinstance(value, str) and SEP in value:
                host, args[key] = split(value)
        spec = args.get("spec")
        if host is None and isinstance(spec, dict):
            for key in _SLOT_ARGS:
                value = spec.get(key)
                if isinstance(value, str) and SEP in value:
                    host, rest = split(value)
                    args["spec"] = {**spec, key: rest}
        host = host or self.focused()
        why = self.refusal(host)
        if why is not None:
            raise Unavailable(why)
        return await self.by_name[str(host)].client.call(op, **args)

    def _slot_of(self, host: str, slot: str) -> dict[str, Any]:
        """A slot as its host last said (fleet name), for a reply that names one."""
        status = self.by_name[host].state.status
        for s in status.slots if status is not None else []:
            if s.id == slot:
                return {**protocol.to_builtins(s), "id": f"{host}{SEP}{slot}"}
        return {"id": f"{host}{SEP}{slot}"}

    async def close(self) -> None:
        await self.cross.close()
        tasks = self._tasks + [t for _, t in self._followers.values()]
        self._tasks, self._followers = [], {}
        for due in (self._sample_due, self._lines_due):
            if due is not None:
                due.cancel()
        self._sample_due = self._lines_due = None
        for t in tasks:
            t.cancel()
        # Each link stops its ssh (its own process group) and reaps it as it is cancelled.
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the links' side ---------------------------------------------------------------------

    def _changed(self, state: HostState) -> None:
        link = self.by_name.get(state.name)
        client = link.client if link is not None else None
        if self.summarised:
            if state.reachable and link is not None and self.is_open(state.name):
                followed = self._followers.get(state.name)
                if followed is None or followed[0] is not client or followed[1].done():
                    if followed is not None:
                        followed[1].cancel()
                    task = asyncio.get_running_loop().create_task(self._follow_detail(link))
                    self._followers[state.name] = (client, task)
        elif state.reachable and client is not None and link is not None:
            followed = self._followers.get(state.name)
            if followed is None or followed[0] is not client:
                if followed is not None:
                    followed[1].cancel()
                task = asyncio.get_running_loop().create_task(self._follow(link, client))
                self._followers[state.name] = (client, task)
        if not state.reachable:
            self._samples.pop(state.name, None)
        shown = self.is_open(state.name)
        if shown:
            self._shown_changed = True
        flipped = self._up.get(state.name) != state.reachable
        self._up[state.name] = state.reachable
        if self.summarised and not shown and not flipped:
            self._lines_soon()  # a summarised host's figures: drawn with the others' changes
        else:
            self._note_fleet()

    def _lines_soon(self) -> None:
        if self._lines_due is not None:
            return
        wait = max(0.0, self._last_lines + SUMMARY_DRAW_S - time.monotonic())
        self._lines_due = asyncio.get_running_loop().call_later(wait, self._lines_now)

    def _lines_now(self) -> None:
        self._lines_due = None
        self._last_lines = time.monotonic()
        self._note_fleet()

    def _note_shown(self) -> None:
        """What the slots view shows changed (a pool across hosts rolled a step): a 'fleet'
        push after which the app asks for the STATUS again."""
        self._shown_changed = True
        self._note_fleet()

    def _note_fleet(self) -> None:
        """One 'fleet' push for any number of link changes until the app reads it."""
        if not self._fleet_pending:
            self._fleet_pending = True
            self._queue.put_nowait({"push": "fleet"})

    def fleet_read(self) -> bool:
        """The app read the 'fleet' push. True: a host whose slots it shows changed (its STATUS
        is worth asking again); False: only summarised hosts' rows did."""
        self._fleet_pending = False
        shown, self._shown_changed = self._shown_changed, False
        return shown

    async def _follow_detail(self, link: Link) -> None:
        """An opened host's pushes on a connection of its own, closed with the host (or when
        the link's connection drops: the link's next answer follows it afresh)."""
        try:
            client = await link.detail_client()
        except (AgentError, OSError):  # the link says when the host is down; not this try
            return
        try:
            await self._follow(link, client)
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def _follow(self, link: Link, client: Any) -> None:
        """A host's pushes, for as long as its connection lasts (the link makes a new one when
        it drops, and _changed follows that one)."""
        name = link.state.name
        with contextlib.suppress(AgentError, OSError):
            await client.call("subscribe", logs="tick")  # a host's lines once a tick
            status = link.state.status
            for s in status.slots if status is not None else []:
                if s.state == protocol.SlotState.STOPPED and not s.launch_id:
                    continue
                tail = protocol.decode_reply(
                    "logs", await client.call("logs", slot=s.id, lines=LOG_TAIL_LINES)
                )
                self._queue.put_nowait(
                    {
                        "push": "log",
                        "data": {
                            "slot": f"{name}{SEP}{s.id}",
                            "lines": list(tail.lines),
                            "launch_id": tail.launch_id,
                        },
                    }
                )
            async for push in client.agent.pushes():
                self._route(name, push)

    def _route(self, host: str, push: dict[str, Any]) -> None:
        kind = push.get("push")
        if kind == "sample":
            data = push.get("data")
            if isinstance(data, dict):
                self._samples[host] = telemetry_of(host, data)
                self._merge_soon()
            return
        if kind == "logs" and isinstance(push.get("data"), list):  # the tick's lines
            each = [push_of(host, {"push": "log", "data": d})["data"] for d in push["data"]]
            self._queue.put_nowait({"push": "logs", "data": each})
            return
        if kind == "event":
            link = self.by_name.get(host)
            if link is not None:
                link.poke()  # the link polls now: its Hosts row follows the change at once
        self._queue.put_nowait(push_of(host, push))

    def _merge_soon(self) -> None:
        if self._sample_due is not None:
            return
        wait = max(0.0, self._last_merge + SAMPLE_MERGE_S - time.monotonic())
        self._sample_due = asyncio.get_running_loop().call_later(wait, self._merge_samples)

    def _merge_samples(self) -> None:
        self._sample_due = None
        self._last_merge = time.monotonic()
        merged = merge_telemetry(self._samples, self.focused())
        self._queue.put_nowait({"push": "sample", "data": merged})
