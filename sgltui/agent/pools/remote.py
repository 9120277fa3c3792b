"""Pools whose workers run on other hosts (fleet.toml's [[pool]] with a `gateway` host).

This agent runs the pool's gateway (smg, agent/pools/gateway.py: its own process group, keys from a
0600 file) and routes to the workers the fleet side names in the remote_pool op: each an URL on
its host's address and the API key that host's agent generated for it (agent/pools/exposure.py
there), which smg sends to that worker. The fleet side (sgltui/fleet/xpool.py) holds the whole
picture and drives it through each host's bridge: this module knows nothing of ssh or hosts,
only a list of endpoints to keep routed. It never leaves the pool without a routable worker:
a worker list that would remove the last ready one is refused, as a roll on one host is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import TYPE_CHECKING, Any

import httpx

from sgltui import protocol
from sgltui.agent.errors import OpError
from sgltui.agent.pools.gateway import Gateway, GatewayError, for_pool, stop_gateways
from sgltui.core.files import private_dir, write_json_atomic
from sgltui.core.placement import DEFAULT_POLICY, PoolPlace
from sgltui.core.tasks import spawn

if TYPE_CHECKING:
    from sgltui.agent.context import AgentContext

log = logging.getLogger("sgltui.agent.remote_pools")

POLL_S = 1.0  # the gateway's word on each worker, for status


class RemotePools:
    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx  # its event bus, its state dir
        self.places: dict[str, PoolPlace] = {}
        self.workers: dict[str, dict[str, protocol.RemoteWorker]] = {}  # pool -> url -> worker
        self.gateways: dict[str, Gateway] = {}
        self.seen: dict[str, dict[str, str]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._poll: asyncio.Task[None] | None = None
        # What the fleet side set, keys included (0600 in the 0700 secrets folder): a restarted
        # agent (kill -9, its keeper) takes the running gateway over, or starts it again.
        self.path = ctx.state_dir / "secrets" / "remote-pools.json"

    async def start(self) -> None:
        """The pools an earlier agent of this state dir ran: their gateway adopted (it kept
        serving) or started again with the recorded workers."""
        try:
            saved = json.loads(self.path.read_text())
        except (OSError, ValueError, RecursionError):
            return
        for raw in saved.get("pools", []) if isinstance(saved, dict) else []:
            try:
                args = protocol.parse_args("remote_pool", raw)
                assert isinstance(args, protocol.RemotePoolArgs)
            except (protocol.ProtocolError, TypeError) as exc:
                log.warning("remote pool in %s not taken back: %s", self.path, exc)
                continue
            place = PoolPlace(args.pool, (), args.port, args.host, args.policy or DEFAULT_POLICY)
            want = {w.url: w for w in args.workers}
            gw = for_pool(place, self.ctx.state_dir, self.ctx.bus.publish)
            gw.keys = {u: w.api_key for u, w in want.items() if w.api_key}
            self.places[args.pool], self.workers[args.pool] = place, want
            if await gw.adopt():
                self.gateways[args.pool] = gw
                self.ctx.bus.publish(
                    protocol.GatewayStart(
                        pool=args.pool, pid=gw.pid, endpoint=gw.endpoint, adopted=True
                    )
                )
            elif want:
                with contextlib.suppress(OpError):
                    await self._start(place, want)
        if self.gateways:
            self._poll = spawn(self._poll_loop(), "fleet pools: poll")

    def _save(self) -> None:
        pools = []
        for name, place in self.places.items():
            workers = [protocol.to_builtins(w) for w in self.workers.get(name, {}).values()]
            pools.append(
                {"pool": name, "port": place.port, "host": place.host, "policy": place.policy,
                 "workers": workers}
            )  # fmt: skip
        private_dir(self.path.parent)
        write_json_atomic(self.path, {"pools": pools})  # 0600

    def __contains__(self, name: object) -> bool:
        return name in self.places

    async def set(self, args: protocol.RemotePoolArgs) -> dict[str, Any]:
        name = args.pool
        if args.drop:
            await self._drop(name)
            return {"name": name, "gateway": {"pid": None, "state": "stopped"}}
        place = PoolPlace(name, (), args.port, args.host, args.policy or DEFAULT_POLICY)
        old = self.places.get(name)
        if old is not None and (old.port, old.host) != (place.port, place.host):
            raise OpError(
                f"pool {name} serves on {old.endpoint}",
                fix=f"drop it first (sgltui fleet pool down {name}) to move it to {place.endpoint}",
            )
        want = {w.url: w for w in args.workers}
        async with self._locks.setdefault(name, asyncio.Lock()):
            gw = self.gateways.get(name)
            if gw is None or gw.pid is None:
                if want:
                    gw = await self._start(place, want)
            else:
                await self._update(gw, want)
            self.places[name] = place
            self.workers[name] = want
            await asyncio.to_thread(self._save)
        if gw is not None and args.wait > 0:
            deadline = time.monotonic() + args.wait
            for url, w in want.items():
                if not await gw.wait_ready(url, max(0.1, deadline - time.monotonic())):
                    raise OpError(
                        f"pool {name}: the gateway did not see {w.name} ({url}) ready within "
                        f"{args.wait:.0f} s",
                        fix=f"is {w.name} ready and its address reachable from here? "
                        f"(its log: {gw.log_path})",
                    )
        if gw is not None and (ws := await gw.workers()) is not None:
            self.seen[name] = {w.url: w.status for w in ws}  # the reply says it as it is now
        if self._poll is None or self._poll.done():
            self._poll = spawn(self._poll_loop(), "fleet pools: poll")
        self.ctx.bus.changed()
        return self.status_of(name)

    async def _start(self, place: PoolPlace, want: dict[str, protocol.RemoteWorker]) -> Gateway:
        name = place.name
        gw = for_pool(place, self.ctx.state_dir, self.ctx.bus.publish)
        first = next(iter(want.values()))
        # smg routes by model name: "default" (what SGLang serves, and batch files carry) is
        # aliased to the workers' model, as for a pool of one host.
        gw.model = await _model_of(first.url, first.api_key)
        gw.keys = {u: w.api_key for u, w in want.items() if w.api_key}
        try:
            await gw.start(list(want))
        except GatewayError as exc:
            self.ctx.bus.publish(protocol.GatewayFailed(pool=name, error=str(exc)))
            raise OpError(str(exc), "unavailable") from None
        self.gateways[name] = gw
        self.ctx.bus.publish(protocol.GatewayStart(pool=name, pid=gw.pid, endpoint=gw.endpoint))
        return gw

    async def _update(self, gw: Gateway, want: dict[str, protocol.RemoteWorker]) -> None:
        gone = [u for u in gw.urls if u not in want]
        new = [u for u in want if u not in gw.urls]
        if gone:
            ready = {w.url for w in await gw.workers() or [] if w.status == "ready"}
            if ready and not ready - set(gone):
                names = ", ".join(
                    self.workers.get(gw.pool, {}).get(u, _Unnamed(u)).name for u in gone
                )
                raise OpError(
                    f"pool {gw.pool}: removing {names} would leave no routable worker",
                    fix="add another worker first",
                )
        for url in new:
            await gw.add_worker(url, want[url].api_key)
            self.ctx.bus.publish(
                protocol.PoolWorkerChanged(pool=gw.pool, worker=want[url].name, step="added")
            )
        for url in gone:
            await gw.remove_worker(url)
            self.ctx.bus.publish(protocol.PoolWorkerChanged(pool=gw.pool, url=url, step="removed"))

    async def _drop(self, name: str) -> None:
        gw = self.gateways.pop(name, None)
        self.places.pop(name, None)
        self.workers.pop(name, None)
        self.seen.pop(name, None)
        await asyncio.to_thread(self._save)
        if gw is not None:
            await gw.stop()
            self.ctx.bus.publish(protocol.GatewayStopped(pool=name))
        self.ctx.bus.changed()

    async def close(self) -> None:
        await stop_gateways(self._poll, self.gateways.values())

    async def _poll_loop(self) -> None:
        while self.gateways:
            for name, gw in list(self.gateways.items()):
                ws = await gw.workers() if gw.pid is not None else None
                if ws is not None:
                    self.seen[name] = {w.url: w.status for w in ws}
            await asyncio.sleep(POLL_S)

    # --- what the rest of the agent asks --------------------------------------------------

    def status_of(self, name: str) -> dict[str, Any]:
        place = self.places[name]
        gw = self.gateways.get(name)
        seen = self.seen.get(name, {})
        workers = self.workers.get(name, {})
        return {
            "name": name,
            "endpoint": place.endpoint,
            "slots": [w.name for w in workers.values()],
            "gateway": {
                "pid": gw.pid if gw else None,
                "state": gw.state if gw else "stopped",
            },
            "workers": [
                {"slot": w.name, "url": u, "gateway_status": seen.get(u)}
                for u, w in workers.items()
            ],
            "note": "workers on other hosts (fleet.toml)",
            "across_hosts": True,  # the fleet's TUI places the slots by these names as they are
        }

    def status(self) -> list[dict[str, Any]]:
        return [self.status_of(n) for n in self.places]

    def serving_profiles(self, name: str) -> list[str]:
        """What the workers the gateway sees ready run, as the fleet side said."""
        seen = self.seen.get(name, {})
        workers = self.workers.get(name, {}).items()
        return sorted({w.profile for u, w in workers if w.profile and seen.get(u) == "ready"})

    def job_target(self, name: str) -> tuple[str | None, str | None, str]:
        gw = self.gateways.get(name)
        if gw is None or gw.pid is None:
            return None, None, f"pool {name}: its gateway is not running"
        if not any(s == "ready" for s in self.seen.get(name, {}).values()):
            return None, None, f"waiting for a worker of pool {name} to be ready"
        return gw.endpoint, None, ""


class _Unnamed:
    def __init__(self, url: str) -> None:
        self.name = url


async def _model_of(url: str, api_key: str | None) -> str | None:
    """The model a worker serves (its /v1/models), for the gateway's "default" alias."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            r = await client.get(f"{url}/v1/models", headers=headers, timeout=5.0)
        data = r.json().get("data") or []
        return str(data[0]["id"]) if data else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None
