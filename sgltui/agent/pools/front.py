"""A slot's stable front endpoint: one port that stays the same across swaps.

Clients talk to the front; the front passes each request through to the slot's current server.
While a swap runs the front *holds* new requests (bounded in count and in time, then 503 with
Retry-After) and sends them to the new server once it is ready; requests already passed through
keep streaming from the old server while it drains, and the drain can empty because the front
admits nothing new to it. Why not sglang-router: docs/architecture.md, "The front endpoint".

The front asks for the API key of the profile its slot serves, by SGLang's own rules and with
its 401 (core/api_auth.py): the routes it answers itself (the Batch API) would answer anyone
otherwise, and a request held across a swap is checked once the hold ends, against the key of
the server it goes to (route_to() sets both at once): a swap from keyless to keyed closes the door
before the first request reaches the new server, a swap back opens it.

Pass-through costs one read and one write per chunk the server sends (no parsing, no
re-encoding): the overhead is measured against going direct by bench/bench_front_swap.py.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec
from aiohttp import web

from sgltui import protocol
from sgltui.core import api_auth

log = logging.getLogger("sgltui.agent.front")

# Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus those aiohttp sets
# itself from the body it sends.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
_HOP_RESPONSE = _HOP - {"content-length"}  # kept: the client gets the server's framing
_UPSTREAM_ERRORS = (aiohttp.ClientError, ConnectionError, asyncio.TimeoutError)

Backend = tuple[str, int]
_PASS = "relayed"  # the name of the route that passes requests to the server


@dataclass(frozen=True)
class Keys:
    """The keys of the profile a front routes to (None: that key is not set)."""

    api_key: str | None = None
    admin_api_key: str | None = None


@dataclass
class FrontConfig:
    """Where fronts listen and how long they hold: agent.toml's [front] (agent/config.py)."""

    port: int | None = 30080  # the first slot's front; the next slots get port+1, +2, ...
    host: str = "127.0.0.1"
    hold_s: float = 300.0  # a held request waits this long for the new server, then 503
    hold_max: int = 4096  # at most this many requests held at once; more get 503 at once
    retry_after_s: int = 5


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


class Front:
    """The front of one slot. hold() / route_to() / release() are called by the supervisor."""

    def __init__(
        self,
        slot_id: str,
        host: str,
        port: int,
        config: FrontConfig | None = None,
        on_event: Callable[[protocol.EventBase], Any] | None = None,
        setting: str = "[front] port in agent.toml",
        routes: list[web.RouteDef] | None = None,
    ) -> None:
        self.slot_id = slot_id
        # routes the front answers itself, before passing the rest through (the OpenAI Batch
        # API: agent/jobs/batch_api.py)
        self.routes = routes or []
        self.setting = setting  # where this port is set: a refusal names it
        self.host, self.port = host, port
        self.config = config or FrontConfig()
        self.on_event = on_event or (lambda event: None)
        self.backend: Backend | None = None
        self.keys = Keys()  # those of the server requests go to (route_to); never shown
        self.held_from: str | None = None  # the launch a hold takes requests away from
        self.error: str | None = None
        self.why_closed = "no server runs on this slot yet; start one with `sgltui start PROFILE`"
        self._gate = asyncio.Event()  # set: requests pass; clear: a swap is on, hold them
        self._gate.set()
        self._hold_started: float | None = None
        self._held = 0
        self._in_flight: collections.Counter[Backend] = collections.Counter()
        self.counts = {"served": 0, "held": 0, "rejected": 0, "cut": 0, "upstream_errors": 0}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    # ---- life ----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{_connect_host(self.host)}:{self.port}"

    async def start(self) -> bool:
        """Listen; False (and `error` says why) when the port cannot be had."""
        # long prompts, base64 images; the key checked before the routes the front answers
        app = web.Application(client_max_size=256 << 20, middlewares=[self._key_mw])
        app.add_routes(self.routes)
        app.router.add_route("*", "/{tail:.*}", self._handle, name=_PASS)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port, reuse_address=True).start()
        except OSError as exc:
            await runner.cleanup()
            self.error = (
                f"front port {self.host}:{self.port} unavailable ({exc.strerror or exc}); "
                f'set {self.setting} to a free port (or "off") and restart the agent '
                "(sgltui agent stop; servers keep running)"
            )
            log.warning("slot %s: %s", self.slot_id, self.error)
            return False
        self._runner = runner
        self._session = upstream_session()
        log.info("slot %s: front listening on %s", self.slot_id, self.url)
        return True

    async def close(self) -> None:
        self._gate.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ---- what the supervisor calls -------------------------------------------------------------

    @property
    def holding(self) -> bool:
        return not self._gate.is_set()

    def hold(self, why: str = "a swap is running", held_from: str | None = None) -> None:
        """New requests wait (bounded) until route_to() or release(); those in flight go on.
        `held_from` names the launch the hold takes requests away from (the old server)."""
        if not self._gate.is_set():
            return
        self.held_from = held_from
        self._gate.clear()
        self._hold_started = time.monotonic()
        self.on_event(protocol.FrontHold(slot=self.slot_id, why=why, in_flight=self.in_flight()))

    def route_to(self, host: str, port: int, keys: Keys | None = None) -> None:
        """Send new and held requests to the server on host:port from now on, asking them for
        `keys` (the server's profile's) first."""
        backend = (_connect_host(host), int(port))
        self.keys = keys or Keys()  # before the gate opens: no held request passes unchecked
        if backend == self.backend and self._gate.is_set():
            return
        self.backend = backend
        self._open(protocol.FrontRoute(backend=f"http://{backend[0]}:{backend[1]}"))

    def release(self, why: str = "no server runs on this slot") -> None:
        """No server will come: held and new requests get 503 (with Retry-After) right away."""
        if self.backend is None and self._gate.is_set():
            self.why_closed = why  # already closed: only the reason moves on (draining -> stopped)
            return
        self.backend, self.why_closed = None, why
        self._open(protocol.FrontRelease(why=why))

    def _open(self, event: protocol.FrontLetGo) -> None:
        held_s = time.monotonic() - self._hold_started if self._hold_started else None
        self._hold_started, self.held_from = None, None
        self._gate.set()
        held_s = round(held_s, 3) if held_s is not None else None
        self.on_event(
            msgspec.structs.replace(event, slot=self.slot_id, held=self._held, held_s=held_s)
        )

    def in_flight(self, backend: tuple[str, int] | None = None) -> int:
        """Requests passed through and not finished: to `backend` (host, port), or to all."""
        if backend is None:
            return sum(self._in_flight.values())
        return self._in_flight.get((_connect_host(backend[0]), int(backend[1])), 0)

    def status(self) -> dict:
        if self.error:
            state = "error"
        elif not self._gate.is_set():
            state = "holding"
        elif self.backend is None:
            state = "no server"
        else:
            state = "routing"
        return {
            "url": None if self.error else self.url,
            "state": state,
            "backend": f"http://{self.backend[0]}:{self.backend[1]}" if self.backend else None,
            "held_now": self._held,
            "holding_for_s": round(time.monotonic() - self._hold_started, 1)
            if self._hold_started
            else None,
            "in_flight": self.in_flight(),
            "hold_s": self.config.hold_s,
            "hold_max": self.config.hold_max,
            "error": self.error,
            **self.counts,
        }

    # ---- requests ------------------------------------------------------------------------------

    def _refused(self, request: web.Request) -> web.Response | None:
        """SGLang's own answer to a request without the key its server asks, or None."""
        status = api_auth.decide(
            request.method,
            request.rel_url.path,
            request.headers.get("Authorization"),
            request.headers.get("x-api-key"),
            self.keys.api_key,
            self.keys.admin_api_key,
        )
        if status is None:
            return None
        return web.json_response(
            {"error": "Unauthorized" if status == 401 else "Forbidden"}, status=status
        )

    @web.middleware
    async def _key_mw(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """The routes the front answers itself wait out a swap as passed-through requests do
        (_handle), then ask for the key of the server behind the front now."""
        if request.match_info.route.name != _PASS:
            refused = await self._wait_gate() or self._refused(request)
            if refused is not None:
                return refused
        return await handler(request)

    def _unavailable(self, message: str) -> web.Response:
        self.counts["rejected"] += 1
        return web.json_response(
            {"error": {"message": message, "type": "unavailable", "code": 503}},
            status=503,
            headers={"Retry-After": str(self.config.retry_after_s)},
        )

    async def _wait_gate(self) -> web.Response | None:
        """Hold the request while a swap runs; a 503 when the hold is full or takes too long."""
        if self._gate.is_set():
            return None
        if self._held >= self.config.hold_max:
            return self._unavailable(
                f"slot {self.slot_id} is swapping servers and already holds "
                f"{self._held} requests; retry later"
            )
        self._held += 1
        self.counts["held"] += 1
        try:
            await asyncio.wait_for(self._gate.wait(), self.config.hold_s)
        except asyncio.TimeoutError:
            return self._unavailable(
                f"slot {self.slot_id} is still swapping servers after {self.config.hold_s:.0f}s; "
                f"retry later"
            )
        finally:
            self._held -= 1
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        refused = await self._wait_gate() or self._refused(request)
        if refused is not None:
            return refused
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        for attempt in (1, 2):
            backend = self.backend
            if backend is None:
                return self._unavailable(f"slot {self.slot_id}: {self.why_closed}")
            self._in_flight[backend] += 1
            try:
                return await self._pass(request, backend, headers, body)
            except aiohttp.ClientConnectorError as exc:
                # Nothing was sent. A swap that began since this request was routed takes the old
                # server away: wait for the new one and try once more.
                if attempt == 1 and (not self._gate.is_set() or self.backend != backend):
                    refused = await self._wait_gate() or self._refused(request)
                    if refused is not None:
                        return refused
                    continue
                self.counts["upstream_errors"] += 1
                return self._bad_gateway(backend, f"does not answer ({exc.os_error})")
            finally:
                self._in_flight[backend] -= 1
                if not self._in_flight[backend]:
                    del self._in_flight[backend]
        raise AssertionError("unreachable")

    async def _pass(
        self, request: web.Request, backend: Backend, headers: dict, body: bytes
    ) -> web.StreamResponse:
        assert self._session is not None
        url = f"http://{backend[0]}:{backend[1]}{request.rel_url}"
        return await relay(
            self._session,
            request,
            url,
            headers,
            body,
            self.counts,
            lambda what: self._bad_gateway(backend, what),
            f"slot {self.slot_id}",
        )

    def _bad_gateway(self, backend: Backend, what: str) -> web.Response:
        return web.json_response(
            {
                "error": {
                    "message": f"slot {self.slot_id}: the server on {backend[0]}:{backend[1]} "
                    f"{what}; see `sgltui status`",
                    "type": "bad_gateway",
                    "code": 502,
                }
            },
            status=502,
        )


async def relay(
    session: aiohttp.ClientSession,
    request: web.Request,
    url: str,
    headers: dict,
    body: bytes,
    counts: dict[str, int],
    bad_gateway: Callable[[str], web.Response],
    who: str,
) -> web.StreamResponse:
    """Pass `request` (its `body` read, its hop headers dropped) to `url` and stream the answer
    back chunk by chunk, unparsed: the front's and the agent endpoint's (agent/endpoint/endpoint.py) one
    way through. A server that dies mid-answer gives a cut stream, never a complete-looking one.
    aiohttp.ClientConnectorError (nothing was sent) is raised: the caller may retry."""
    try:
        upstream = await session.request(
            request.method, url, headers=headers, data=body or None, allow_redirects=False
        )
    except aiohttp.ClientConnectorError:
        raise  # nothing was sent: the caller may wait for the next server and retry
    except _UPSTREAM_ERRORS as exc:
        counts["upstream_errors"] += 1
        return bad_gateway(f"it failed before answering: {exc!r}")
    done = False
    try:
        out = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for k, v in upstream.headers.items():
            if k.lower() not in _HOP_RESPONSE:
                out.headers.add(k, v)
        await out.prepare(request)
        content = upstream.content
        while True:
            try:
                chunk = await content.readany()
            except _UPSTREAM_ERRORS as exc:
                # The server died mid-response (killed, crashed): the client must see a cut
                # stream, never a complete-looking one, so the connection is dropped without
                # the closing chunk.
                counts["cut"] += 1
                log.warning("%s: stream from %s cut: %r", who, url, exc)
                if request.transport is not None:
                    request.transport.close()
                return out
            if not chunk:
                break
            try:
                await out.write(chunk)
            except ConnectionError:
                return out  # the client went away; closing upstream tells the server
        await out.write_eof()
        done = True
        counts["served"] += 1
        return out
    finally:
        if done:
            upstream.release()
        else:
            upstream.close()


def upstream_session() -> aiohttp.ClientSession:
    """The client session a front (or the agent endpoint) passes requests through: no limit,
    no decompression, no cookies shared between clients."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),  # one client's cookies must never reach another
        skip_auto_headers=("User-Agent", "Accept-Encoding"),
    )


HOP_HEADERS = _HOP
