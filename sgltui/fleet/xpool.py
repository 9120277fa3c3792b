"""A pool across hosts (fleet.toml's [[pool]]), driven through each host's bridge.

Every agent stays a one-host agent: a member host's agent is asked to serve its slot on its
address with a key of its own (op slot_expose; agent/pools/exposure.py), and the gateway host's agent
to route to the endpoints it is given (op remote_pool; agent/pools/remote.py). This module is
the only place that knows the whole pool, and it sequences:

- up: each member exposed (its server relaunched there if it ran on loopback or without the
  key; started with --profile if stopped), then the gateway given every worker, waiting until
  it reports each one ready;
- swap (rolling, one member at a time): preflight it on its host, take it out of the gateway
  (refused by the gateway's agent if no other worker is ready: the pool never has zero), swap
  it on its host (that agent drains it first: every request it had finishes there), put it
  back and wait until the gateway says ready; a member whose swap fails is put back as it runs
  (its host rolled it back) and the roll stops, the pool serving mixed. A roll first routes
  every member (a no-op after a whole roll): running it again mends one cut short (a ^C, a
  quit, a host's link lost while a member was out of the gateway), whether or not a member is
  left to swap, and the gateway never loses its only ready worker to the roll;
- down: the gateway ended (the members keep running, still exposed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from sgltui.client import AgentError
from sgltui.core import causes
from sgltui.fleet.client import HostClient, HostError
from sgltui.fleet.config import Fleet, Pool

READY_WAIT_S = 60.0  # the gateway sees a ready worker within a health check or two


class PoolError(Exception):
    """One line: which pool, which member, what to do; `refusal` is the agent's own error when
    a host's agent refused (None: the host could not be asked)."""

    def __init__(self, message: str, refusal: AgentError | None = None) -> None:
        super().__init__(message)
        self.refusal = refusal


Say = Callable[[str], None]


class CrossPool:
    """`clients`: the hosts' connections to use (host name -> a client with `call`), lent by a
    caller that keeps its own (the fleet TUI's links); without them, `async with` opens one
    ssh per host and closes them after (the CLI)."""

    def __init__(
        self,
        fleet: Fleet,
        pool: Pool,
        say: Say | None = None,
        clients: Mapping[str, Any] | None = None,
        force: list[str] | None = None,
    ) -> None:
        self.fleet, self.pool = fleet, pool
        # Preflight checks every launch of the roll skips (`--force CHECK`), as on one host.
        self.force: dict[str, Any] = {"force": list(force)} if force else {}
        self.say: Say = say or (lambda line: None)
        self.clients: Mapping[str, Any] = clients if clients is not None else {}
        self._owned: dict[str, HostClient] = {}
        self._lent = clients is not None
        # The roll as it goes, for a view of it (the fleet TUI's pool row).
        self.at: str | None = None  # the member being swapped now (host/slot)
        self.done: list[str] = []  # the members that run the roll's profile

    async def __aenter__(self) -> CrossPool:
        if self._lent:
            return self
        hosts = {h for h, _ in self.pool.slots} | {self.pool.gateway}
        try:
            for name in sorted(hosts):
                c = HostClient(self.fleet, self.fleet.host(name), "fleet-pool")
                await c.connect()
                self._owned[name] = c
        except HostError as exc:
            await self.close()
            raise PoolError(str(exc)) from None
        self.clients = self._owned
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """The connections it opened (lent ones stay their owner's)."""
        for c in self._owned.values():
            with contextlib.suppress(Exception):
                await c.close()
        self._owned.clear()

    async def _call(self, where: str, op: str, /, **args: Any) -> Any:
        try:
            client = self.clients[where]
        except KeyError:  # a lent connection that is down now
            raise PoolError(
                f"pool {self.pool.name}: host {where} is unreachable; nothing sent there (the "
                f"pool is as this step left it: sgltui fleet pool status {self.pool.name})"
            ) from None
        try:
            return await client.call(op, **args)
        except AgentError as exc:
            raise PoolError(f"host {where}: {exc}", refusal=exc) from None

    # --- the members ------------------------------------------------------------------------

    async def _slot_state(self, host: str, slot: str) -> dict[str, Any]:
        st = await self._call(host, "status")
        for s in st.get("slots") or []:
            if s.get("id") == slot:
                return dict(s)
        raise PoolError(
            f"pool {self.pool.name}: host {host} has no slot {slot!r}; fix slots in "
            f"{self.fleet.path} (sgltui --host {host} status lists its slots)"
        )

    async def expose(self, host: str, slot: str, profile: str | None) -> dict[str, Any]:
        """The member served on its host's address with its key, launched so if it was not:
        the worker the gateway gets (name, url, api_key)."""
        name = f"{host}/{slot}"
        addr = self.fleet.address(host)
        e = await self._call(host, "slot_expose", slot=slot, address=addr)
        if not e.get("applied"):
            s = await self._slot_state(host, slot)
            if s.get("state") == "ready" and profile in (None, s.get("profile")):
                self.say(f"{name}: relaunching {s.get('profile')} on {addr} with its key")
                await self._launch(host, slot, "restart", wait=True)
            elif profile is not None:
                self.say(f"{name}: starting {profile} on {addr}")
                op = "swap" if s.get("state") == "ready" else "start"
                await self._launch(host, slot, op, profile=profile, wait=True)
            else:
                raise PoolError(
                    f"pool {self.pool.name}: {name} is {s.get('state')}; give a profile "
                    f"(sgltui fleet pool up {self.pool.name} --profile NAME)"
                )
            e = await self._call(host, "slot_expose", slot=slot, address=addr)
            if not e.get("applied"):
                s = await self._slot_state(host, slot)
                # The slot's own cause (a port in use, no GPU memory) says what to do; the
                # logs are the way in when it has none.
                cause = s.get("cause") or {}
                why = f": {causes.line(cause)}" if cause.get("summary") else ""
                raise PoolError(
                    f"pool {self.pool.name}: {name} is {s.get('state')}, not serving on "
                    f"{addr}{why}; see sgltui --host {host} logs --slot {slot}"
                )
        return {
            "name": name,
            "url": e["url"],
            "api_key": e.get("api_key"),
            "profile": e.get("profile"),
        }

    async def _launch(self, host: str, slot: str, op: str, /, **args: Any) -> Any:
        """A launch op on the member's host; a refusal (a preflight check) names the member."""
        try:
            return await self._call(host, op, slot=slot, **args, **self.force)
        except PoolError as exc:
            if exc.refusal is None:  # an unreachable host: its own line
                raise
            why = exc.refusal
            raise PoolError(f"pool {self.pool.name}: {host}/{slot} not started: {why}") from None

    async def _set(self, workers: list[dict[str, Any]], wait: float = 0.0) -> dict[str, Any]:
        p = self.pool
        args: dict[str, Any] = {"pool": p.name, "port": p.port, "host": p.host, "wait": wait}
        if p.policy:
            args["policy"] = p.policy
        result: dict[str, Any] = await self._call(p.gateway, "remote_pool", workers=workers, **args)
        return result

    async def gateway_status(self) -> dict[str, Any] | None:
        st = await self._call(self.pool.gateway, "status")
        for p in st.get("pools") or []:
            if p.get("name") == self.pool.name:
                return dict(p)
        return None

    # --- what the CLI runs ------------------------------------------------------------------

    async def up(self, profile: str | None = None) -> dict[str, Any]:
        workers = await asyncio.gather(*(self.expose(h, s, profile) for h, s in self.pool.slots))
        self.say(f"gateway on {self.pool.gateway}: {len(workers)} workers")
        return await self._set(list(workers), wait=READY_WAIT_S)

    async def down(self) -> dict[str, Any]:
        p = self.pool
        result: dict[str, Any] = await self._call(
            p.gateway, "remote_pool", pool=p.name, port=p.port, host=p.host, drop=True
        )
        return result

    async def swap(self, profile: str) -> dict[str, Any]:
        members = list(self.pool.slots)
        workers = {f"{h}/{s}": await self.expose(h, s, None) for h, s in members}
        # Every member routed first: one that a roll cut short left out is back before another
        # is taken out (the gateway's agent refuses to remove its only ready worker).
        await self._set(list(workers.values()), wait=READY_WAIT_S)
        self.done = []
        done = self.done
        for host, slot in members:
            name = self.at = f"{host}/{slot}"
            s = await self._slot_state(host, slot)
            if s.get("profile") == profile and s.get("state") == "ready":
                done.append(name)
                continue
            # Checked before it leaves the gateway: a refusal (unknown profile, no GPU memory)
            # leaves the pool as it was.
            pre = await self._call(host, "preflight", slot=slot, profile=profile, **self.force)
            if not pre.get("ok"):
                raise PoolError(
                    f"pool {self.pool.name}: the roll stopped at {name} before taking it out: "
                    f"{pre.get('error') or 'preflight refused'} (done: {', '.join(done) or 'none'})"
                )
            others = [w for n, w in workers.items() if n != name]
            # The gateway's agent refuses this when no other worker is ready.
            await self._set(others)
            self.say(f"{name}: out of the gateway; swapping to {profile}")
            try:
                error = await self._roll_one(host, slot, profile, workers)
            except BaseException:  # cut short (^C, a quit, a link lost): say the mend
                self.say(
                    f"{name} is out of the gateway until the roll is run again "
                    f"(sgltui fleet pool swap {self.pool.name} {profile}): the pool "
                    "serves on the others meanwhile"
                )
                raise
            if error is not None:  # back in the gateway where it serves (its host rolled back)
                raise PoolError(
                    f"pool {self.pool.name}: the roll stopped at {name}: {error}; the pool "
                    f"serves mixed (done: {', '.join(done) or 'none'})"
                )
            done.append(name)
            self.say(f"{name}: back in the gateway, ready, runs {profile}")
        self.at = None
        status = await self.gateway_status()
        return {"pool": self.pool.name, "profile": profile, "done": done, "status": status}

    async def _roll_one(
        self, host: str, slot: str, profile: str, workers: dict[str, dict[str, Any]]
    ) -> str | None:
        """One member, out of the gateway now: swapped on its host and put back as it runs.
        Why it does not run `profile` now, or None."""
        name = f"{host}/{slot}"
        error = None
        try:
            reply = await self._call(
                host, "swap", slot=slot, profile=profile, wait=True, drain="wait", **self.force
            )
            got = reply.get("slot") or {}
            if got.get("profile") != profile or got.get("state") != "ready":
                cause = ((reply.get("result") or {}).get("cause") or {}).get("summary")
                error = f"{name} runs {got.get('profile')} ({got.get('state')})" + (
                    f": {cause}" if cause else ""
                )
        except PoolError as exc:
            error = str(exc)
        try:
            workers[name] = await self.expose(host, slot, None)
        except PoolError as exc:
            error = error or str(exc)
            workers.pop(name, None)
        await self._set(list(workers.values()), wait=READY_WAIT_S)
        return error
