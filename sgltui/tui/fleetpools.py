"""fleet.toml's pools across hosts in the fleet TUI: their rows, and their ops run here.

No agent sees such a pool whole (its gateway runs on one host, its members on others), so its
rolling swap and its `up` run on the fleet side, sgltui/fleet/xpool.py's CrossPool, as for
`sgltui fleet pool swap|up`. Here CrossPool runs as a task of the fleet source on the links' own
connections (no ssh of its own), its lines pushed to the app as notes ({"push": "note"}); the op
that asked is answered at once, as an agent answers a pool's swap.

Rows: the gateway host reports the pool (protocol.PoolStatus.across_hosts: slots already
host/slot). Its members are fleet.toml's (the gateway lists only the workers it routes to, and a
roll takes one out), with the roll as it goes; a pool not up yet is listed from fleet.toml, so
that a profile key on its row starts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sgltui import protocol
from sgltui.client import AgentError
from sgltui.client.errors import Busy, Invalid, Unavailable
from sgltui.fleet.config import Fleet, Pool
from sgltui.fleet.xpool import CrossPool, PoolError


class LinkClients(Mapping[str, Any]):
    """The hosts' connections as their links hold them now: a link that reconnects mid-roll
    lends its new one; a host that is down has none (CrossPool says so in one line)."""

    def __init__(self, links: Mapping[str, Any]) -> None:
        self.links = links

    def __getitem__(self, host: str) -> Any:
        link = self.links[host]
        if link.client is None or not link.state.reachable:
            raise KeyError(host)
        return link.client

    def __iter__(self) -> Iterator[str]:
        return iter(self.links)

    def __len__(self) -> int:
        return len(self.links)


@dataclass
class Run:
    """One op on a cross-host pool, as its row shows it."""

    cp: CrossPool
    profile: str
    rolling: bool  # a rolling swap (else `up`: the members started or swapped, then routed)
    task: asyncio.Task[None] | None = None
    error: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None

    @property
    def what(self) -> str:
        return "roll" if self.rolling else "start"

    def view(self) -> dict[str, Any]:
        roll = protocol.RollView(
            state="rolling" if self.finished is None else ("stopped" if self.error else "done"),
            kind="roll" if self.rolling else "up",
            profile=self.profile,
            slot=self.cp.at,
            done=list(self.cp.done),
            error=self.error,
            started=self.started,
            finished=self.finished,
        )
        return dict(protocol.to_builtins(roll))


class CrossPools:
    """The fleet source's fleet.toml pools (see the module's docstring)."""

    def __init__(
        self,
        fleet: Fleet | None,
        links: Mapping[str, Any],
        push: Callable[[dict[str, Any]], None],
        changed: Callable[[], None],
    ) -> None:
        self.fleet = fleet
        self.links = links
        self._push = push
        self._changed = changed  # the app reads the pools afresh (the row follows the roll)
        self.runs: dict[str, Run] = {}

    def pool_named(self, name: object) -> Pool | None:
        """The fleet.toml pool that a pool's fleet name (`gateway/pool`) stands for."""
        if self.fleet is None or not isinstance(name, str):
            return None
        host, _, pool = name.partition("/")
        return next((p for p in self.fleet.pools if (p.gateway, p.name) == (host, pool)), None)

    def rows(self, pools: list[dict[str, Any]], known: set[str]) -> list[dict[str, Any]]:
        """Every host's pools (fleet names) with fleet.toml's as their rows show them: its
        members, its roll, and a row for one not up whose gateway host has answered once
        (`known`)."""
        if self.fleet is None or not self.fleet.pools:
            return pools
        by_name = {p.get("name"): p for p in pools}
        out = list(pools)
        for xp in self.fleet.pools:
            name = f"{xp.gateway}/{xp.name}"
            row = by_name.get(name)
            if row is not None and not row.get("across_hosts"):
                continue  # the gateway host's own (host.toml) pool of that name
            if row is None:
                if xp.gateway not in known:
                    continue
                row = {"name": name, "across_hosts": True, "gateway": {"state": "not up"}}
                out.append(row)
            row["slots"] = [f"{h}/{s}" for h, s in xp.slots]
            run = self.runs.get(xp.name)
            if run is not None:
                row["roll"] = run.view()
        return out

    def serving(self, xp: Pool) -> bool:
        """The gateway host's latest status lists the pool with its gateway running."""
        link = self.links.get(xp.gateway)
        status = link.state.status if link is not None else None
        for p in status.pools if status is not None else []:
            if p.name == xp.name and p.across_hosts and p.gateway is not None:
                return p.gateway.pid is not None
        return False

    def start(
        self, op: str, xp: Pool, profile: object, refusal: Callable[[str], str | None]
    ) -> None:
        """Start `op` (swap: a rolling swap if the pool is up, else `up`; start: `up`) on the
        pool, or refuse it at once in one line."""
        assert self.fleet is not None  # pool_named found it in the fleet
        name = xp.name
        run = self.runs.get(name)
        if run is not None and run.finished is None:
            raise Busy(
                f"pool {name}: a {run.what} to {run.profile} is in progress; wait for it to end "
                "(its lines: the Activity tab)"
            )
        if not isinstance(profile, str) or not profile:
            raise Invalid(f"pool {name}: name the profile to run")
        for host in sorted({h for h, _ in xp.slots} | {xp.gateway}):
            why = refusal(host)  # a member's or the gateway's host down: nothing is started
            if why:
                raise Unavailable(why)
        cp = CrossPool(
            self.fleet, xp, say=lambda line: self.note(name, line), clients=LinkClients(self.links)
        )
        run = Run(cp, profile, rolling=op == "swap" and self.serving(xp))
        self.runs[name] = run
        run.task = asyncio.get_running_loop().create_task(self._run(run))
        self._changed()

    async def _run(self, run: Run) -> None:
        cp, name = run.cp, run.cp.pool.name
        try:
            if run.rolling:
                result = await cp.swap(run.profile)
                said = f"pool {name} rolled to {run.profile}: {', '.join(result['done'])}"
            else:
                result = await cp.up(run.profile)
                seen = ", ".join(
                    f"{w.get('slot')} {w.get('gateway_status') or 'not seen yet'}"
                    for w in result.get("workers") or []
                )
                said = f"pool {name} up on {cp.pool.gateway}: {seen or 'no workers'}"
            self.note(name, said)
        except (PoolError, AgentError, OSError) as exc:
            run.error = " ".join(str(exc).split())
            self.note(name, run.error, "error")
        except Exception as exc:  # noqa: BLE001 - never a silent end: the operator is told
            run.error = f"pool {name}: the {run.what} to {run.profile} failed: {exc!r}"
            self.note(name, run.error, "error")
        finally:
            run.finished = time.time()
            cp.at = None if run.error is None else cp.at
            self._changed()

    def note(self, pool: str, line: str, level: str = "info") -> None:
        """A line of the op for the operator (a notification and the Activity tab)."""
        self._push(
            {"push": "note", "data": {"title": f"pool {pool}", "text": line, "level": level}}
        )
        self._changed()

    def in_progress(self) -> list[str]:
        """The ops running now, a line each (what quitting would cut short)."""
        out = []
        for name, run in self.runs.items():
            if run.finished is None:
                at = f" at {run.cp.at}" if run.cp.at else ""
                out.append(f"pool {name}: the {run.what} to {run.profile}{at}")
        return out

    async def close(self) -> None:
        """Ops still running end with the app (as `fleet pool swap` ends with a ^C): the pool
        stays as the step they were at left it, and `sgltui fleet pool status` says how."""
        tasks = [r.task for r in self.runs.values() if r.task is not None and not r.task.done()]
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
