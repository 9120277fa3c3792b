"""A host kept connected: poll its STATUS, and when ssh drops or the host does not answer,
say since when and try again with backoff (1, 2, 4 ... 30 s). Each host has its own task, so a
slow or dead host never holds up another."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from sgltui import protocol
from sgltui.client import AgentError
from sgltui.core import retry
from sgltui.fleet.client import HostClient, HostError
from sgltui.fleet.config import Fleet, Host
from sgltui.fleet.view import HostState

FANOUT = 32  # ssh sessions at once for a one-shot question (2,000 hosts started 2,000)
BACKOFF_FIRST_S, BACKOFF_MAX_S = 1.0, 30.0  # between tries of a host that is down
STATUS_TIMEOUT_S = 10.0  # a host that takes longer to answer STATUS is treated as unreachable
# A host whose view did not change is polled less often, up to this many times the interval
# (an idle fleet costs little however many hosts it has); any change brings the interval back.
# A dropped ssh is noticed at once all the same: its exit wakes the link.
QUIET_FACTOR_MAX = 4


class HostLink:
    def __init__(
        self,
        fleet: Fleet,
        host: Host,
        interval_s: float = 2.0,
        on_change: Callable[[HostState], None] | None = None,
        client_name: str = "fleet",
    ) -> None:
        self.fleet, self.host = fleet, host
        self.interval_s = interval_s
        self.on_change = on_change
        self.client_name = client_name
        self.state = HostState(name=host.name, ssh=host.target)
        self.client: HostClient | None = None
        self._nap_fut: asyncio.Future | None = None
        self._seen: tuple | None = None

    def poke(self) -> None:
        """Retry (or poll) now instead of at the end of the wait (a user asked)."""
        fut = self._nap_fut
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def detail_client(self) -> HostClient:
        """A second connection to this host for what an opened host shows (its pushes) in a
        fleet of many hosts: subscribed while the host is open, closed with it (the agent has
        no unsubscribe). The link's own connection only polls STATUS. ConnectionError: it
        could not connect (the link says why the host is down)."""
        client = HostClient(self.fleet, self.host, self.client_name)
        try:
            await client.connect()
        except HostError as exc:
            raise ConnectionError(str(exc)) from None
        return client

    async def _nap(self, seconds: float) -> None:
        """Sleep `seconds` unless poked (or the ssh exits) first: a timer and a future, no task
        per wait (what an idle poll costs, times the hosts)."""
        loop = asyncio.get_running_loop()
        fut = self._nap_fut = loop.create_future()
        handle = loop.call_later(seconds, self.poke)
        try:
            await fut
        finally:
            handle.cancel()
            self._nap_fut = None

    async def run(self) -> None:
        backoff = retry.Backoff(first=BACKOFF_FIRST_S, cap=BACKOFF_MAX_S)
        try:
            while True:
                try:
                    await self._session()
                    backoff.reset()  # it had connected: start the backoff over
                except HostError as exc:
                    self._down(str(exc))
                delay = backoff.failed()
                self.state.next_retry = time.time() + delay
                self._changed()
                await self._nap(delay)
        finally:
            if self.client is not None:
                await self.client.close()
                self.client = None

    async def _session(self) -> None:
        client = HostClient(self.fleet, self.host, self.client_name)
        # A dropped ssh ends the wait between polls: noticed at once (never a later backoff's).
        client.on_exit = lambda: self.poke() if self.client is client else None
        self.client = client
        quiet = 0
        try:
            await client.connect()
            was_down = not self.state.reachable
            while True:
                t0 = time.perf_counter()
                try:
                    raw = await asyncio.wait_for(client.call("status"), STATUS_TIMEOUT_S)
                    status = protocol.decode_reply("status", raw)
                except asyncio.TimeoutError:
                    raise HostError(
                        f"host {self.host.name}: no status within {STATUS_TIMEOUT_S:.0f}s; retrying"
                    ) from None
                except (AgentError, protocol.ProtocolError):
                    raise HostError(await self._lost(client)) from None
                self.state.rtt_ms = (time.perf_counter() - t0) * 1000
                self.state.status = status
                self.state.polls += 1
                seen = fingerprint(status)
                if was_down or seen != self._seen:
                    quiet = 0
                    self._seen = seen
                    if was_down:
                        self.state.reachable, self.state.since = True, time.time()
                        self.state.error, self.state.next_retry = None, None
                        was_down = False
                    self._changed()
                else:
                    quiet = min(quiet + 1, QUIET_FACTOR_MAX - 1)
                await self._nap(self.interval_s * (1 + quiet))
        finally:
            await client.close()
            self.client = None

    async def _lost(self, client: HostClient) -> str:
        if client.proc is not None:
            try:
                await asyncio.wait_for(client.proc.wait(), 2.0)
            except asyncio.TimeoutError:
                pass
        return client.why_lost()

    def _down(self, error: str) -> None:
        self._seen = None
        if self.state.reachable or self.state.since is None:
            self.state.since = time.time()
        self.state.reachable = False
        self.state.error = error
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.state)


def fingerprint(st: protocol.StatusReply) -> tuple:
    """What the fleet's view shows of a host: when it is the same, nothing needs redrawing."""
    engine = st.telemetry.engine
    tok = tuple(
        sorted(
            (k, round(float(v.get("gen_throughput") or 0), 0))
            for k, v in engine.items()
            if isinstance(v, dict)
        )
    )
    slots = tuple((s.id, s.profile, str(s.state), s.phase) for s in st.slots)
    return (slots, tok, len(st.telemetry.gpus), st.agent.version)


async def poll_each(fleet: Fleet, timeout_s: float = 30.0) -> AsyncIterator[HostState]:
    """Every host's STATUS, asked of all at once (FANOUT ssh at a time), each given as it
    answers: a refused host among the first, a host that hangs after `timeout_s`, never holding
    up another's answer (`fleet status --json-lines`)."""
    gate = asyncio.Semaphore(FANOUT)
    tasks = [asyncio.ensure_future(_ask_gated(fleet, h, timeout_s, gate)) for h in fleet.hosts]
    try:
        for fut in asyncio.as_completed(tasks):
            yield await fut
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def poll_once(fleet: Fleet, timeout_s: float = 30.0) -> list[HostState]:
    """Every host's STATUS once, all at the same time (`fleet status`), in fleet.toml's order:
    a dead host costs at most `timeout_s`, never another host's answer."""
    got = {st.name: st async for st in poll_each(fleet, timeout_s)}
    return [got[h.name] for h in fleet.hosts]


async def _ask_gated(
    fleet: Fleet, host: Host, timeout_s: float, gate: asyncio.Semaphore
) -> HostState:
    async with gate:
        return await _ask(fleet, host, timeout_s)


async def _ask(fleet: Fleet, host: Host, timeout_s: float) -> HostState:
    st = HostState(name=host.name, ssh=host.target, retrying=False)
    client = HostClient(fleet, host, "fleet-status")
    try:
        await client.connect(timeout=timeout_s)
        t0 = time.perf_counter()
        raw = await asyncio.wait_for(client.call("status"), timeout_s)
        st.rtt_ms = (time.perf_counter() - t0) * 1000
        st.status = protocol.decode_reply("status", raw)
        st.reachable, st.since = True, time.time()
    except HostError as exc:
        st.error, st.since = str(exc), time.time()
    except asyncio.TimeoutError:
        st.error = f"host {host.name}: no status within {timeout_s:.0f}s"
        st.since = time.time()
    except (AgentError, protocol.ProtocolError):
        st.error, st.since = client.why_lost(), time.time()
    finally:
        await client.close()
    return st
