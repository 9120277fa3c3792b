"""The agent's one OpenAI endpoint: a stable port where the request's `model` names the profile.

    POST /v1/...  {"model": NAME}   NAME: a profile's name, one of its `aliases`, or its
                                    served-model-name (docs/endpoint.md)
    GET  /v1/models                 every routable profile, with its state (serving, asleep,
                                    starting, cold) in an extra field `sgltui`

A request for a profile that serves is passed through to its server (a pool's: to the pool's
gateway) the way a slot's front passes its own (agent/pools/front.py's relay: chunk by chunk, never
parsed). One asleep on a slot (a standby) is woken by a warm swap of that slot; one not loaded
is started on a free slot, else on the slot of the least recently used profile that holds no
lease (agent/endpoint/leases.py), that one kept asleep when it can be, else stopped. Requests for a
profile being woken or started wait in a bounded queue (agent.toml's [endpoint]); past it they
get 503 with Retry-After, before any byte of an answer: never a cut stream.

What to do is decided by agent/endpoint/policy.py (pure); this module feeds it what the agent
looks like and carries the decisions out through the agent's own ops (swap, start,
standby_add, stop), as a user's command would be: every request-driven change is in the
session with its cause. A Batch API (or anything else that serves under this port) mounts as an
aiohttp sub-application with `Endpoint.mount(prefix, app)` before the agent starts it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hmac
import json
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from sgltui import protocol
from sgltui.agent.endpoint.moves import Moves
from sgltui.agent.endpoint.policy import (
    EndpointConfig,
    Routable,
    SlotLook,
    Traffic,
    idle_due,
    names_table,
    plan,
    resolve,
    switch_due,
)
from sgltui.agent.pools.front import HOP_HEADERS, relay, upstream_session
from sgltui.agent.slot.lifecycle import IDLE, LAUNCHING, READY
from sgltui.agent.slot.server_url import connect_host, slot_url
from sgltui.core import launch_secrets
from sgltui.core.profiles import ProfileError
from sgltui.core.tasks import watched

if TYPE_CHECKING:
    from sgltui.agent.agent_calls import AgentCalls
    from sgltui.agent.context import AgentContext
    from sgltui.agent.endpoint.leases import Leases
    from sgltui.agent.pools.pools import Pools
    from sgltui.agent.slot.slot import Slot
    from sgltui.agent.swap.operations import Operations
    from sgltui.agent.swap.standby import Standbys
    from sgltui.core import profiles as core_profiles

log = logging.getLogger("sgltui.agent.endpoint")

TICK_S = 0.5  # the driver looks at least this often (idle timers, waits past their time)
TABLE_S = 5.0  # the names table is rebuilt at least this often (new or edited profiles)


class Endpoint:
    def __init__(
        self,
        ctx: AgentContext,
        config: EndpointConfig,
        *,
        calls: AgentCalls,
        ops: Operations,
        standbys: Standbys,
        pools: Pools,
        leases: Leases,
    ) -> None:
        self.ctx = ctx  # the slots, the profiles, the event bus
        self.ops = ops  # is a lifecycle command on a slot?
        self.standbys = standbys  # what sleeps on each slot, to wake
        self.pools = pools  # slots behind a pool's gateway: never swapped by the endpoint
        self.leases = leases  # profiles never evicted
        self.cfg = config
        self.error: str | None = None
        self.traffic: dict[str, Traffic] = {}
        self.routables: dict[str, Routable] = {}
        self.table: dict[str, list[str]] = {}
        self._table_at = 0.0
        # its wakes, starts, evictions and idle profiles put away, each the agent's own op
        self.moves = Moves(ctx.bus, calls, self.changed)
        self.blocked: dict[str, str] = {}  # profile -> the leases that keep it out
        self.refused = 0
        self.counts = {"served": 0, "cut": 0, "upstream_errors": 0}
        self.subapps: list[tuple[str, web.Application]] = []
        self.routes: list[web.RouteDef] = []
        self._front_seen: dict[str, tuple[int, int, int]] = {}  # slot -> its front's counts
        self._pulse = asyncio.Event()
        self._kick = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._driver: asyncio.Task | None = None

    # ---- life ----------------------------------------------------------------------------------

    @property
    def url(self) -> str | None:
        if self.cfg.port is None or self.error:
            return None
        host = connect_host(self.cfg.host)
        return f"http://{f'[{host}]' if ':' in host else host}:{self.cfg.port}"

    def add_routes(self, routes: list[web.RouteDef]) -> None:
        """Serve these routes on this port too (OpenAI's Batch API: agent/jobs/batch_api.py); before
        start(). They win over the routing by `model`."""
        self.routes.extend(routes)

    def mount(self, prefix: str, app: web.Application) -> None:
        """Serve `app` under `prefix` on this port (e.g. a Batch API at /v1/batches); before
        start(). Its routes win over the routing by `model`."""
        self.subapps.append((prefix, app))

    async def start(self) -> None:
        if self.cfg.port is None:
            return
        app = web.Application(client_max_size=256 << 20)  # long prompts, base64 images
        for prefix, sub in self.subapps:
            app.add_subapp(prefix, sub)
        app.router.add_routes(self.routes)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.cfg.host, self.cfg.port, reuse_address=True).start()
        except OSError as exc:
            await runner.cleanup()
            self.error = (
                f"endpoint port {self.cfg.host}:{self.cfg.port} unavailable "
                f'({exc.strerror or exc}); set [endpoint] port in agent.toml to a free port (or "off") '
                "and restart the agent (sgltui agent stop; servers keep running)"
            )
            log.warning("%s", self.error)
            return
        self._runner = runner
        self._session = upstream_session()
        self._driver = asyncio.get_running_loop().create_task(self._drive(), name="endpoint")
        watched(self._driver, "the endpoint's driver")
        log.info("endpoint listening on %s", self.url)

    async def close(self) -> None:
        if self._driver is not None:
            self._driver.cancel()
        for task in list(self.moves.tasks.values()):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def changed(self) -> None:
        """The agent changed (bus.on_change): waiting requests look again, the driver too."""
        self._pulse.set()
        self._pulse = asyncio.Event()
        self._kick.set()

    # ---- what the agent looks like --------------------------------------------------------------

    def _t(self, name: str) -> Traffic:
        t = self.traffic.get(name)
        if t is None:  # first seen: its idle time and its age for the LRU start now
            t = self.traffic[name] = Traffic(last_request=time.monotonic())
        return t

    def _pooled(self) -> dict[str, str | None]:
        """Slots the endpoint never swaps -> the URL that serves them: a pool of two or more
        (its gateway; a roll is the pool's swap), an attached server's slot. A pool of one is a
        slot with its front on the pool's port: the endpoint swaps it as any other."""
        out: dict[str, str | None] = {}
        for place in self.pools.places.values():
            if len(place.slots) > 1:
                out.update({sid: place.endpoint for sid in place.slots})
        for slot in self.ctx.slots.values():
            if slot.external is not None:
                out.setdefault(slot.id, None)
        return out

    def looks(self) -> list[SlotLook]:
        pooled = self._pooled()
        out = []
        for slot in self.ctx.slots.values():
            moving = self.moves.closing.get(slot.id)
            swap = slot.swap if slot.swap is not None and slot.swap.step != "failed" else None
            busy = bool(moving or swap or self.ops.busy(slot.id)) or slot.state not in (
                READY,
                *IDLE,
            )
            profile = moving or (swap.to if swap else None) or slot.profile_name
            asleep = tuple(
                n for n, sb in self.standbys.of(slot.id).items() if self._asleep(slot, n, sb)
            )
            out.append(
                SlotLook(
                    id=slot.id,
                    profile=profile,
                    ready=slot.state == READY and not busy,
                    busy=busy or slot.state == LAUNCHING,
                    asleep=asleep,
                    pooled=slot.id in pooled,
                    has_server=slot.state not in IDLE,
                )
            )
        return out

    def _asleep(self, slot: Slot, name: str, sb: object) -> bool:
        return self.standbys.warm(slot, name) is sb

    def _route(self, name: str) -> str | None:
        """Where a request for `name` goes now, or None (it must wait)."""
        pooled = self._pooled()
        for slot in self.ctx.slots.values():
            if slot.profile_name != name or slot.state != READY:
                continue
            if self.moves.closing.get(slot.id) not in (None, name):
                continue  # the endpoint is moving it to another profile: none for this one
            if slot.swap is not None and slot.swap.step != "failed":
                continue  # (a swap's last step ends it: its job's tail, the state saved, is
                # not waited for)
            return pooled.get(slot.id) or slot_url(slot)
        return None

    def _serving(self) -> list[str]:
        return [
            s.profile_name for s in self.ctx.slots.values() if s.state == READY and s.profile_name
        ]

    async def _names(self, force: bool = False) -> None:
        """The names table from the profile folders (a worker thread: it reads files)."""
        now = time.monotonic()
        if not force and self.table and now - self._table_at < TABLE_S:
            return
        self._table_at = now
        catalog = self.ctx.catalog

        def read() -> dict[str, Routable]:
            profiles = (catalog.refresh() if force else None, catalog.index.profiles())[1]
            return {n: routable(p) for n, p in profiles.items()}  # reads key files: blocking

        self.routables = await asyncio.to_thread(read)
        self.table = names_table(self.routables.values())

    # ---- requests --------------------------------------------------------------------------------

    def _unavailable(self, message: str) -> web.Response:
        self.refused += 1
        return web.json_response(
            {"error": {"message": message, "type": "unavailable", "code": 503}},
            status=503,
            headers={"Retry-After": str(self.cfg.retry_after_s)},
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "endpoint": self.url})

    async def _models(self, request: web.Request) -> web.Response:
        await self._names()
        looks = {s.id: s for s in self.looks()}
        data = []
        for name, r in sorted(self.routables.items()):
            state, where = self._state_of(name, looks)
            data.append(
                {
                    "id": name,
                    "object": "model",
                    "created": 0,
                    "owned_by": "sgltui",
                    "sgltui": {
                        "state": state,
                        "slots": where,
                        "served_model_name": r.served,
                        "aliases": list(r.aliases),
                        "waiting": self.traffic[name].waiting if name in self.traffic else 0,
                        "leased_by": self.leases.held().get(name),
                        "needs_key": r.api_key is not None,
                    },
                }
            )
        return web.json_response({"object": "list", "data": data})

    def _state_of(self, name: str, looks: dict[str, SlotLook]) -> tuple[str, list[str]]:
        serving = [s.id for s in looks.values() if s.ready and s.profile == name]
        if serving:
            return "serving", serving
        moving = [s.id for s in looks.values() if s.busy and s.profile == name]
        if moving:
            return "starting", moving
        asleep = [s.id for s in looks.values() if name in s.asleep]
        if asleep:
            return "asleep", asleep
        return "cold", []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return _error(
                404,
                "not_found",
                "this endpoint routes POST requests by their `model`; GET /v1/models lists them",
            )
        body = await request.read()
        try:
            doc = json.loads(body or b"{}")
        except ValueError:
            return _error(400, "invalid_request_error", "the body is not JSON")
        model = doc.get("model") if isinstance(doc, dict) else None
        if not isinstance(model, str) or not model:
            return _error(
                400,
                "invalid_request_error",
                'say which profile: give "model" (GET /v1/models lists them)',
            )
        await self._names()
        name = resolve(model, self.table, self._serving())
        if name is None:
            await self._names(force=True)  # a profile file added since the last look
            name = resolve(model, self.table, self._serving())
        if name is None:
            names = ", ".join(sorted(self.routables)) or "none"
            return _error(
                404,
                "model_not_found",
                f"no profile, alias or served-model-name {model!r}; profiles: {names}",
                extra={"models": sorted(self.routables)},
            )
        r = self.routables[name]
        if r.api_key is not None and not _key_ok(request, r.api_key):
            return _error(
                401,
                "invalid_api_key",
                f"profile {name} needs its API key: send `Authorization: Bearer KEY`",
            )
        if r.served and model != r.served and isinstance(doc, dict):
            doc["model"] = r.served  # the server answers to its own name (SGLang's LoRA syntax)
            body = json.dumps(doc).encode()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        for attempt in (1, 2):
            url = await self._wait_route(name, request.remote or "?")
            if isinstance(url, web.Response):
                return url
            t = self._t(name)
            t.in_flight += 1
            t.last_request = time.monotonic()
            try:
                assert self._session is not None
                return await relay(
                    self._session,
                    request,
                    url + str(request.rel_url),
                    headers,
                    body,
                    self.counts,
                    functools.partial(_bad_gateway, name, url),
                    f"endpoint ({name})",
                )
            except aiohttp.ClientConnectorError as exc:
                if attempt == 2:
                    self.counts["upstream_errors"] += 1
                    return _error(502, "bad_gateway", f"{name}: {url} does not answer ({exc})")
            finally:
                t.in_flight -= 1
                t.last_request = time.monotonic()
                self._kick.set()
        raise AssertionError("unreachable")

    async def _wait_route(self, name: str, peer: str) -> str | web.Response:
        """The URL to send a request for `name` to, once it serves; a 503 past the queue's
        bounds (its count, its time, a lease that keeps room from being made)."""
        url = self._route(name)
        if url is not None:
            return url
        t = self._t(name)
        if t.waiting >= self.cfg.queue_max:
            return self._unavailable(
                f"{t.waiting} requests already wait for {name} ([endpoint] queue_max); retry later"
            )
        arrived = time.monotonic()
        t.waiting += 1
        if t.waiting_since is None:
            t.waiting_since = arrived
        self.moves.asker[name] = peer
        self.ctx.bus.changed()
        try:
            while True:
                self._kick.set()
                pulse = self._pulse
                try:
                    await asyncio.wait_for(pulse.wait(), TICK_S)
                except asyncio.TimeoutError:
                    pass
                url = self._route(name)
                if url is not None:
                    return url
                failed = self.moves.failed.get(name)
                if failed is not None and failed[0] >= arrived:
                    return self._unavailable(f"{name} did not come up: {failed[1]}")
                why = self.blocked.get(name)
                limit = self.cfg.lease_wait_s if why else self.cfg.wait_s
                if time.monotonic() - arrived >= limit:
                    return self._unavailable(
                        f"{name} cannot be loaded: {why}"
                        if why
                        else f"{name} is still not serving after {limit:.0f}s; retry later"
                    )
        finally:
            t.waiting -= 1
            if t.waiting == 0:
                t.waiting_since = None
            self.ctx.bus.changed()

    # ---- the driver: wakes, starts, evictions, idle ---------------------------------------------

    async def _drive(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._kick.wait(), TICK_S)
            except asyncio.TimeoutError:
                pass
            self._kick.clear()
            try:
                await self._names()
                self.step(time.monotonic())
            except Exception:  # one bad look must not end the endpoint
                log.exception("endpoint: a decision failed")

    def step(self, now: float) -> None:
        """One look: each profile with waiting requests gets what it needs (policy.plan) when
        the slot it needs may switch (policy.switch_due); idle profiles are put away."""
        leased = self.leases.held()
        lru = {n: t.last_request for n, t in self.traffic.items()}
        waiting = sorted(
            ((n, t) for n, t in self.traffic.items() if t.waiting),
            key=lambda nt: nt[1].waiting_since or now,
        )
        for name, t in waiting:
            if name in self.moves.tasks:
                continue
            act = plan(name, self.looks(), leased, lru)
            if act.kind == "blocked":
                if self.blocked.get(name) != act.reason:
                    self.moves.say("refused", name, f"{name} waits: {act.reason}", level_slot=None)
                self.blocked[name] = act.reason
                continue
            self.blocked.pop(name, None)
            if act.kind not in ("wake", "start", "evict") or act.slot is None:
                continue
            if act.victim and not switch_due(self._t(act.victim), t, now, self.cfg):
                continue  # collation: the serving profile keeps the slot a while longer
            self.moves.closing[act.slot] = name
            self._spawn(name, self.moves.carry_out(act, name))
        self._idle(now, leased)

    def _idle(self, now: float, leased: dict[str, str]) -> None:
        for look in self.looks():
            name = look.profile
            if (
                not look.ready
                or look.pooled
                or not name
                or name in leased
                or name in self.moves.tasks
            ):
                continue
            if self._front_busy(look.id):
                self._t(name).last_request = now  # requests through the slot's front count too
            r = self.routables.get(name)
            idle_s = r.idle_s if r is not None and r.idle_s is not None else self.cfg.idle_s
            if idle_due(self._t(name), idle_s, now):
                self.moves.closing[look.id] = name
                self._spawn(name, self.moves.put_away(look.id, name, idle_s))

    def _front_busy(self, slot_id: str) -> bool:
        """The slot's own front passed a request since the last look, or has one in flight."""
        front = self.ctx.slots[slot_id].front
        if front is None:
            return False
        seen = (front.counts["served"], front.counts["held"], front.in_flight())
        busy = seen != self._front_seen.get(slot_id) or seen[2] > 0
        self._front_seen[slot_id] = seen
        return busy

    def _spawn(self, name: str, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=f"endpoint-{name}")
        self.moves.tasks[name] = task
        watched(task, f"endpoint: {name}")

    # ---- status ------------------------------------------------------------------------------------

    def view(self) -> protocol.EndpointView:
        state = "off" if self.cfg.port is None else ("error" if self.error else "listening")
        return protocol.EndpointView(
            url=self.url,
            state=state,
            error=self.error,
            queue={n: t.waiting for n, t in self.traffic.items() if t.waiting},
            leases=self.leases.views(),
            last_eviction=self.moves.last_eviction,
            swaps=self.moves.swaps,
            refused=self.refused,
        )


def routable(profile: core_profiles.Profile) -> Routable:
    """A core Profile as the endpoint routes to it, its key read from its [key-files] when it
    names one (blocking). A key file that cannot be read asks for a key nobody holds: the launch
    would be refused anyway, so a request must not evict or wake anything for it."""
    try:
        if getattr(profile, "key_files", None):
            profile = launch_secrets.with_key_files(profile)
    except ProfileError:
        profile = dataclasses.replace(
            profile, server={**profile.server, "api-key": secrets.token_urlsafe(32)}
        )
    server = profile.server
    served = server.get("served-model-name") or server.get("model-path") or server.get("model")
    return Routable(
        name=profile.name,
        served=str(served) if served else None,
        aliases=tuple(getattr(profile, "aliases", ()) or ()),
        api_key=profile.api_key,
        idle_s=getattr(profile, "idle_s", None),
    )


def _key_ok(request: web.Request, key: str) -> bool:
    given = request.headers.get("Authorization", "")
    token = given[7:].strip() if given[:7].lower() == "bearer " else ""
    return hmac.compare_digest(token.encode(), key.encode())


def _bad_gateway(name: str, url: str, what: str) -> web.Response:
    return _error(502, "bad_gateway", f"{name}: the server at {url} {what}")


def _error(status: int, kind: str, message: str, extra: dict | None = None) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": kind, "code": status, **(extra or {})}},
        status=status,
    )
