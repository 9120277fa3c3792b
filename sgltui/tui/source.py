"""Where the app's data comes from: the TuiSource protocol and LiveSource (the agent).

The app never opens a socket or a file itself; it is handed a source. LiveSource talks to the
agent; the session area's ReplaySource replays a recorded session (read_only=True); tests and
the idle benchmark use ScriptedSource (tests/support/scripted.py: test support, not shipped).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import msgspec

from sgltui import protocol
from sgltui.client import AgentError

# What a source's calls raise: the agent's one-line refusal, or a link that broke.
SOURCE_ERRORS = (AgentError, OSError)


class MalformedReply(AgentError):
    """A reply of another shape than its op's (protocol.OPS): an agent of another version,
    or a bug. One line, like a refusal; a SOURCE_ERRORS handler catches it too."""


class Pushed(msgspec.Struct, frozen=True):
    """A push as the app reads it, decoded once where it leaves the source: `kind` is the
    envelope's ("event", "sample", "log", "logs", and a fleet source's "note" and "fleet"),
    `data` as sent, and an event's Struct (protocol.decode_event: an unknown or malformed one
    is an OtherEvent), so that nothing matches an event by its "type" text. A Struct: made in
    C (a frozen dataclass set each field through object.__setattr__, for every push)."""

    kind: str
    data: Any
    event: protocol.EventBase | None = None


def decode_push(push: Mapping[str, Any] | Pushed) -> Pushed:
    """A source's push -> Pushed (one already decoded is given back as it is)."""
    if type(push) is dict:  # (a source's: read by subscript, no call for a sample)
        kind = str((push["push"] if "push" in push else None) or "")
        data = push["data"] if "data" in push else None
    elif isinstance(push, Pushed):
        return push
    else:
        kind, data = str(push.get("push") or ""), push.get("data")
    if kind != "event":
        return Pushed(kind, data)
    data = data if isinstance(data, Mapping) else {}
    return Pushed(kind, data, protocol.decode_event(data))


@runtime_checkable
class TuiSource(Protocol):
    read_only: bool
    # What the top bar and refusals call a read-only source ("REPLAY", "READ-ONLY").
    read_only_label: str

    async def connect(self) -> None: ...
    async def snapshot(self) -> dict: ...
    def pushes(self) -> AsyncIterator[dict]: ...
    async def call(self, op: str, **args: Any) -> Any: ...
    async def close(self) -> None: ...


async def ask(source: TuiSource, op: str, **args: Any) -> Any:
    """`op`'s reply as its typed reply (protocol.OPS: a Struct, or a list of them), read by
    attribute. A reply of another shape raises MalformedReply: a notification, never an
    AttributeError deep in a worker or a pane."""
    result = await source.call(op, **args)
    try:
        return protocol.decode_reply(op, result)
    except protocol.ProtocolError as exc:
        raise MalformedReply(str(exc)) from None


class LiveSource:
    """The agent, over its unix socket: one connection for calls, one for pushes.

    Two connections so that a slow call (a swap waits for a drain) never holds up the pushes
    that show its progress. Only the first connect may start an agent: when the agent goes away
    later it was stopped on purpose or is restarting, and reconnecting must not race it.
    """

    read_only_label = "READ-ONLY"

    def __init__(
        self,
        state_dir: Path,
        profiles_dirs: Sequence[Path | str] = (),
        autostart: bool = True,
        client_name: str = "tui",
        read_only: bool = False,
    ) -> None:
        from sgltui.client import client_id

        self.state_dir = Path(state_dir)
        self.profiles_dirs = [str(p) for p in profiles_dirs]
        self.read_only = read_only
        # How the agent labels this TUI's commands in events ("tui:pid@host"), so the app can
        # tell its own commands from those of other clients.
        self._name = client_name
        self.client_name = client_id(client_name)
        self._autostart = autostart
        self._calls: Any = None
        self._subs: Any = None

    async def connect(self) -> None:
        from sgltui.client import (
            AgentClient,  # deferred: the agent area may be absent in tests
        )

        await self.close()
        calls = AgentClient(self.state_dir, client_name=self._name)
        await calls.connect(autostart=self._autostart, profiles_dirs=self.profiles_dirs)
        self._autostart = False
        subs = AgentClient(self.state_dir, client_name=self._name)
        await subs.connect(autostart=False)
        self._calls, self._subs = calls, subs

    async def snapshot(self) -> dict:
        return await self.call("status")

    def pushes(self) -> AsyncIterator[dict]:
        # Every slot's log lines once a tick, with the sample: one wake-up and one frame a
        # second with 8 idle servers, not one per server's line (agent/logbatch.py).
        return self._subs.subscribe(logs="tick")

    async def call(self, op: str, **args: Any) -> Any:
        from sgltui.client import READ_ONLY_OPS
        from sgltui.client.errors import Refused, Unavailable

        if self._calls is None:
            raise Unavailable("not connected to the agent (reconnecting)")
        if self.read_only and op not in READ_ONLY_OPS:
            # The app disables these actions already; this keeps any other path from a command.
            raise Refused(f"read-only: {op} is not available")
        if (
            op in ("start", "swap", "profiles")
            and self.profiles_dirs
            and "profiles_dirs" not in args
        ):
            args["profiles_dirs"] = self.profiles_dirs
        return await self._calls.call(op, **args)

    async def close(self) -> None:
        for client in (self._calls, self._subs):
            if client is not None:
                try:
                    await client.close()
                except SOURCE_ERRORS:  # closing a dead connection must not mask the real error
                    pass
        self._calls = self._subs = None
