"""Talking to the agent: AgentClient (asyncio) and call_sync (for CLI commands).

`connect()` starts the agent on demand: it runs `python -m sgltui.agent`, which detaches itself
(double fork), and waits for the socket to answer. A dead agent's leftover socket refuses the
connection, which is exactly the "start one" signal; the new agent removes the stale file.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from sgltui import __version__, protocol
from sgltui.client.errors import (
    AgentError,
    ConnectionLost,
    Internal,
    Unavailable,
    VersionMismatch,
    from_reply,
)
from sgltui.client.paths import paths

START_TIMEOUT_S = 20.0
STREAM_LIMIT = 8 << 20  # a line (a status or a push) longer than this is a broken peer
READ_ONLY_OPS = protocol.READ_ONLY_OPS  # where the TUI's source looks for them


__all__ = ["AgentClient", "AgentError", "VersionMismatch", "call_sync", "decode_reply"]


def decode_reply(op: str, result: Any) -> Any:
    """An op's result (JSON values, as `call` gives it) as its typed reply (protocol.OPS)."""
    try:
        return protocol.decode_reply(op, result)
    except protocol.ProtocolError as exc:
        raise Internal(str(exc)) from None


def client_id(name: str = "cli") -> str:
    return f"{name}:{os.getpid()}@{socket.gethostname().split('.')[0]}"


def spawn_agent(state_dir: Path, profiles_dirs: Sequence[str | os.PathLike] = ()) -> None:
    """Start a detached agent for `state_dir` (returns once the launcher process has forked)."""
    argv = [sys.executable, "-m", "sgltui.agent", "--state-dir", str(state_dir)]
    for d in profiles_dirs:
        argv += ["--profiles", str(d)]
    # The launcher double-forks and exits at once; waiting for it reaps it (no zombie).
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        close_fds=True,
    )
    _, err = proc.communicate(timeout=START_TIMEOUT_S)
    if proc.returncode != 0:
        msg = (err or b"").decode(errors="replace").strip().splitlines()
        raise Unavailable(
            f"the agent did not start: {msg[-1] if msg else f'exit code {proc.returncode}'}"
        )


class AgentClient:
    def __init__(self, state_dir: Path, client_name: str = "cli") -> None:
        self.state_dir = Path(state_dir)
        self.client = client_id(client_name)
        self.paths = paths(self.state_dir)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._ops: dict[int, str] = {}  # the op of each pending request: its error's class
        self._pushes: asyncio.Queue = asyncio.Queue()
        self._read_task: asyncio.Task | None = None
        self._closed = False

    async def connect(
        self,
        autostart: bool = True,
        profiles_dirs: Sequence[str | os.PathLike] = (),
        check_version: bool = True,
    ) -> None:
        """Connect (starting an agent if none runs and `autostart`), then check that the agent
        is of this version: one AgentError line otherwise (`check_version=False` is for the
        commands that must work anyway: finding and stopping an agent of another version)."""
        await self._connect(autostart, profiles_dirs)
        await self._greet(check_version)

    async def _greet(self, check_version: bool) -> None:
        if check_version:
            await self._hello()
            return
        # The agent answers nothing but ping and shutdown before a hello that agrees: say it
        # anyway. An agent of another version refuses it (and then answers those two only).
        with contextlib.suppress(AgentError):
            await self.call("hello", version=__version__, protocol=protocol.PROTOCOL_VERSION)

    async def _hello(self) -> None:
        try:
            res = await self.call("hello", version=__version__, protocol=protocol.PROTOCOL_VERSION)
        except AgentError:
            # A refused hello is a VersionMismatch (errors.from_reply): the agent's line
            # says both versions and what to do.
            await self.close()
            raise
        try:
            hello: protocol.HelloReply = protocol.decode_reply("hello", res)
        except protocol.ProtocolError:  # an agent whose hello says something else: another version
            hello = protocol.HelloReply(version="", protocol=0, pid=0)
        problem = protocol.version_mismatch(
            hello.version, hello.protocol, __version__, protocol.PROTOCOL_VERSION
        )
        if problem:
            await self.close()
            raise VersionMismatch(problem)

    async def _connect(self, autostart: bool, profiles_dirs: Sequence[str | os.PathLike]) -> None:
        try:
            await self._open()
            return
        except (FileNotFoundError, ConnectionRefusedError, OSError) as exc:
            if not autostart:
                raise Unavailable(
                    f"no agent is running for {self.state_dir} ({_why(exc)}); "
                    f"any sgltui command that needs it starts one"
                ) from None
        await asyncio.to_thread(spawn_agent, self.state_dir, profiles_dirs)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                await self._open()
                return
            except (FileNotFoundError, ConnectionRefusedError, OSError):
                if time.monotonic() > deadline:
                    raise Unavailable(
                        f"the agent did not come up within {START_TIMEOUT_S:.0f}s; "
                        f"see {self.paths['log']}"
                    ) from None
                await asyncio.sleep(0.05)

    async def _open(self) -> None:
        reader, writer = await asyncio.open_unix_connection(
            str(self.paths["socket"]), limit=STREAM_LIMIT
        )
        self._attach(reader, writer)

    def _attach(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._closed = False
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    async def attach(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        check_version: bool = True,
    ) -> None:
        """Speak the protocol over streams opened elsewhere (sgltui/fleet: the pipes of
        `ssh HOST sgltui agent bridge`, which carries the socket's bytes unchanged)."""
        self._attach(reader, writer)
        await self._greet(check_version)

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._closed

    async def _read_loop(self) -> None:
        assert self._reader is not None
        error = "the agent closed the connection"
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                try:
                    msg = protocol.decode_message(line)
                except protocol.ProtocolError:
                    continue
                if isinstance(msg, protocol.Push):
                    self._pushes.put_nowait({"push": msg.push, "data": msg.data})
                    continue
                fut = self._pending.pop(msg.id, None) if isinstance(msg.id, int) else None
                op = self._ops.pop(msg.id, "?") if isinstance(msg.id, int) else "?"
                if fut is not None and not fut.done():
                    if msg.ok:
                        fut.set_result(msg.result)
                    else:
                        fut.set_exception(from_reply(op, msg.error))
        except (ConnectionError, OSError, ValueError) as exc:
            error = f"connection to the agent lost ({_why(exc)})"
        except asyncio.CancelledError:
            error = "connection closed"
        self._closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionLost(error))
        self._pending.clear()
        self._ops.clear()
        self._pushes.put_nowait(None)  # ends subscribe()

    async def call(self, op: str, **args: Any) -> Any:
        if self._writer is None or self._closed:
            raise Unavailable("not connected to the agent")
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._ops[rid] = op
        req = protocol.Request(id=rid, op=op, args=args, client=self.client)
        try:
            self._writer.write(protocol.encode(req))
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            self._pending.pop(rid, None)
            self._ops.pop(rid, None)
            # The read loop may have failed the future already (the peer went while we wrote):
            # this error replaces it, so mark its exception seen or asyncio logs it as never
            # retrieved (fleet status to 150 unreachable hosts printed one).
            if fut.done():
                fut.exception()
            else:
                fut.cancel()
            raise ConnectionLost(f"connection to the agent lost ({_why(exc)})") from None
        return await fut

    async def call_args(self, args: protocol.Args) -> Any:
        """The op its arguments' Struct names (protocol.op_for: SwapArgs is "swap"), sent with
        them: what a typo in an argument's name would be is a TypeError here, not a refusal."""
        return await self.call(protocol.op_for(args), **protocol.args_dict(args))

    async def subscribe(self, **args: Any) -> AsyncIterator[dict]:
        """Pushes from now on; `args` are subscribe's (logs="tick": one "logs" push a tick)."""
        await self.call("subscribe", **args)
        async for msg in self.pushes():
            yield msg

    async def pushes(self) -> AsyncIterator[dict]:
        """Push messages of an already subscribed connection (after `await call("subscribe")`)."""
        while True:
            msg = await self._pushes.get()
            if msg is None:
                return
            yield msg

    async def close(self) -> None:
        self._closed = True
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass
        if self._read_task is not None:
            self._read_task.cancel()
            try:
                await self._read_task
            except (asyncio.CancelledError, ConnectionError, OSError, AgentError):
                pass


def _why(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no socket"
    if isinstance(exc, ConnectionRefusedError):
        return "socket left by a dead agent"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def call_sync(
    state_dir: Path,
    op: str | protocol.Args,
    autostart: bool = True,
    profiles_dirs: Sequence[str | os.PathLike] = (),
    client_name: str = "cli",
    check_version: bool = True,
    **args: Any,
) -> Any:
    """One request from synchronous code (CLI commands): `op` and its arguments, or the
    arguments' Struct, which names its op (protocol.op_for). `profiles_dirs` is where an agent it
    starts looks for profiles, and goes with the ops that take it (unless the Struct has some)."""
    if isinstance(op, protocol.Args):
        args = {**protocol.args_dict(op), **args}
        if profiles_dirs and not args.get("profiles_dirs"):
            args.pop("profiles_dirs", None)  # call_sync's own, as for an op by name
        op = protocol.op_for(op)
    name: str = op

    async def run() -> Any:
        client = AgentClient(state_dir, client_name)
        await client.connect(
            autostart=autostart, profiles_dirs=profiles_dirs, check_version=check_version
        )
        try:
            spec = protocol.OPS.get(name)
            if profiles_dirs and spec and "profiles_dirs" in spec.args.__struct_fields__:
                args.setdefault("profiles_dirs", [str(d) for d in profiles_dirs])
            return await client.call(name, **args)
        finally:
            await client.close()

    try:
        return asyncio.run(run())
    except ConnectionLost:
        # An agent that was just replaced (killed, restarted) may drop the first connection;
        # a read-only question is safe to ask once more. Commands are never repeated.
        if name not in protocol.READ_ONLY_OPS:
            raise
        time.sleep(0.2)
        return asyncio.run(run())
