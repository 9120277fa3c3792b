"""A fleet of scripted hosts for the app: links that hold a fixed STATUS (or none) and never
reach a network, so the fleet's screen is deterministic (snapshots) and calls are recorded."""

from __future__ import annotations

import asyncio
from typing import Any

from sgltui import protocol
from sgltui.fleet.view import HostState
from sgltui.tui.fleetsource import FleetSource
from tests.support.scripted import T0, ScriptedSource


class FakeClient:
    """A host's connection: records each call as (host, op, args) and answers as a scripted
    agent of that host's STATUS would."""

    def __init__(self, name: str, status: dict, calls: list) -> None:
        self.name, self.calls = name, calls
        self.closed = False
        self.agent = self  # pushes() below stands for AgentClient's
        self.queue: asyncio.Queue = asyncio.Queue()
        self.scripted = ScriptedSource(status, logs=[f"{name} log line"])

    async def call(self, op: str, **args: Any) -> Any:
        self.calls.append((self.name, op, dict(args)))
        if op == "subscribe":
            return {"subscribed": True}
        if op == "status":
            return self.scripted.status
        return self.scripted.reply(op, args)

    async def close(self) -> None:
        self.closed = True
        self.calls.append((self.name, "close", {}))

    async def pushes(self):
        while True:
            msg = await self.queue.get()
            if msg is None:
                return
            yield msg


class FakeLink:
    def __init__(
        self, name: str, status: dict | None, calls: list, since: float = T0, error: bool = True
    ) -> None:
        self.state = HostState(name=name, ssh=f"u@{name}")
        self.on_change = None
        self.interval_s = 2.0
        self.client = None
        self.details: list[FakeClient] = []  # the connections opened for the host's detail
        self.calls = calls
        if status is not None:
            self.state.status = protocol.decode_reply("status", status)
            self.state.reachable, self.state.since = True, since
            self.client = FakeClient(name, status, calls)
        else:
            self.state.since = since
            if error:
                self.state.error = f"host {name}: ssh: connect to host {name} port 22: refused"

    async def run(self) -> None:
        await asyncio.Event().wait()

    def poke(self) -> None:
        pass

    async def detail_client(self) -> FakeClient:
        assert self.client is not None, "a host that is down has no detail"
        client = FakeClient(self.state.name, self.client.scripted.status, self.calls)
        self.details.append(client)
        return client


def fleet_source(statuses: dict[str, dict | None], errors: bool = True) -> tuple[FleetSource, list]:
    """A source of scripted hosts (None: a host that does not answer; `errors`: it says why,
    which the app shows in a notification)."""
    calls: list = []
    links = [FakeLink(name, st, calls, error=errors) for name, st in statuses.items()]
    return FleetSource(links), calls  # type: ignore[arg-type]
