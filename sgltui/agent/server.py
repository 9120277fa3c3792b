"""The agent's unix-socket API: one request, reply or push a line (sgltui/protocol/).

Each request runs as its own task, so a long `swap ... wait=true` does not hold up a `status`
on the same connection, and a reply is written whenever its command finishes (matched by id).
A connection that goes away mid-command is simply forgotten; the command carries on, except an
attach or adopt still asking the server (agent/slot/attach.py): that is given up with its client.

One client must not stall the agent or grow its memory: a connection has at most
MAX_IN_FLIGHT requests running, and the next line is not read until one finishes (the client's
writes then block in its own socket buffer: backpressure); a reply or push that the client does
not read within SEND_TIMEOUT_S drops the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from sgltui import protocol
from sgltui.agent.agent_calls import Handle
from sgltui.agent.errors import OpError
from sgltui.agent.pushes import Pushes, PushQueue
from sgltui.agent.slot.attach import GIVEN_UP_WITHOUT_CLIENT
from sgltui.core.safe_text import printable

log = logging.getLogger("sgltui.agent.server")

MAX_LINE = 8 << 20  # a bench spec or a push is small; a bigger line is a broken client
SUBSCRIBER_QUEUE = 5000  # pushes buffered per client before a non-reading client is dropped
MAX_IN_FLIGHT = 16  # requests of one connection running at once


class AgentServer:
    def __init__(self, handle: Handle, pushes: Pushes, send_timeout_s: float, path: Path) -> None:
        self.handle = handle  # each request's op (Supervisor.handle)
        self.pushes = pushes  # a subscriber's queue joins them
        self.send_timeout_s = send_timeout_s  # agent.toml: a client that reads nothing goes
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[asyncio.Task] = set()

    async def start(self) -> None:
        old = os.umask(0o177)  # the socket is born 0600: no window where others can connect
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.path), limit=MAX_LINE
            )
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2)
            except asyncio.TimeoutError:
                pass
        for t in list(self._conns):
            t.cancel()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task:
            self._conns.add(task)
        conn = _Conn(self, reader, writer)
        try:
            await conn.run()
        except (asyncio.CancelledError, ConnectionError):
            pass
        except Exception:
            log.exception("connection handler")
        finally:
            conn.shutdown()
            if task:
                self._conns.discard(task)


class _Conn:
    def __init__(
        self, server: AgentServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server, self.reader, self.writer = server, reader, writer
        self.queue: PushQueue | None = None
        self.tasks: set[asyncio.Task] = set()
        self.given_up_without_me: set[asyncio.Task] = set()  # GIVEN_UP_WITHOUT_CLIENT's
        self.pusher: asyncio.Task | None = None
        self.closed = False
        self.slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        # A connection opens with hello (the version check); until one agrees only the ops that
        # work whatever the versions (ping, shutdown: finding and stopping any agent) answer.
        self.greeted = False

    async def run(self) -> None:
        while not self.closed:
            await self.slots.acquire()  # backpressure: read on only when a request is done
            try:
                raw = await self.reader.readline()
            except (asyncio.LimitOverrunError, ValueError):
                self.slots.release()
                too_long = protocol.Error(code="invalid", message="request line too long")
                await self.send(self._refusal(None, too_long))
                return
            if not raw:
                self.slots.release()
                return
            if not self.greeted:
                # Until a hello agrees, each request is answered before the next is read: a
                # request pipelined behind the hello is judged after it.
                refusal = self._before_hello(raw)
                await (self.send(refusal) if refusal else self.dispatch(raw))
                self.slots.release()
                continue
            t = asyncio.get_running_loop().create_task(self.dispatch(raw))
            self.tasks.add(t)
            t.add_done_callback(self._done)

    @staticmethod
    def _before_hello(raw: bytes) -> protocol.Reply | None:
        """The refusal of a request read before a hello agreed, or None to answer it."""
        try:
            req = protocol.decode_request(raw)
        except protocol.ProtocolError:
            return None  # dispatch answers it with the protocol's own one line
        if req.op in protocol.VERSIONLESS_OPS:
            return None
        return protocol.Reply(
            id=req.id,
            ok=False,
            error=f"{printable(req.op, 40)!r} before hello: a connection's first request is hello "
            "(the version handshake, as sgltui's own clients send it); send hello first",
        )

    def _done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        self.given_up_without_me.discard(task)
        self.slots.release()

    async def dispatch(self, raw: bytes) -> None:
        rid: protocol.RequestId = None
        op = "?"
        try:
            req = protocol.decode_request(raw)
            rid, op = req.id, req.op
            args = protocol.parse_args(op, req.args)  # the op's Struct (protocol.OPS)
            task = asyncio.current_task()
            if op in GIVEN_UP_WITHOUT_CLIENT and task is not None and task in self.tasks:
                self.given_up_without_me.add(task)
            result: Any = await self.server.handle(op, args, req.client)
            if op == "hello":
                self.greeted = True  # it agreed (a mismatch raised OpError)
            if op == "subscribe":
                self.subscribe(getattr(args, "logs", "each") == "tick")
            reply = protocol.Reply(id=rid, ok=True, result=result)
        except OpError as exc:
            reply = self._refusal(rid, exc.error)
        except protocol.ProtocolError as exc:
            reply = self._refusal(rid, protocol.Error(code="invalid", message=str(exc)))
        except Exception as exc:  # a bug in a handler: logged with its traceback, one line back
            log.exception("op %s failed", op)
            why = f"internal error in {op}: {type(exc).__name__}: {exc}"
            reply = self._refusal(rid, protocol.Error(code="internal", message=why))
        await self.send(reply)

    def _refusal(self, rid: protocol.RequestId, error: protocol.Error) -> protocol.Reply:
        """An error reply: the typed Error once a hello agreed (both ends speak this protocol),
        before that the bare line, which a client of any version reads (a refused hello is how
        it learns of the mismatch)."""
        return protocol.Reply(id=rid, ok=False, error=error if self.greeted else error.line())

    def subscribe(self, logs_per_tick: bool = False) -> None:
        if self.queue is not None:
            return
        self.queue = PushQueue(SUBSCRIBER_QUEUE)
        self.queue.logs_per_tick = logs_per_tick
        self.server.pushes.subscribers.add(self.queue)
        self.pusher = asyncio.get_running_loop().create_task(self.push_loop())

    async def push_loop(self) -> None:
        assert self.queue is not None
        while not self.closed:
            if self.queue.overflowed and self.queue.empty():
                log.warning("dropping a client that stopped reading pushes")
                self.writer.close()
                return
            msg = await self.queue.get()
            await self.send(msg)

    async def send(self, msg: protocol.Reply | dict) -> None:
        if self.closed:
            return
        try:
            self.writer.write(protocol.encode(msg))
            # A client that reads nothing for this long is dropped (agent.toml send_timeout_s).
            timeout = self.server.send_timeout_s
            await asyncio.wait_for(self.writer.drain(), timeout)
        except asyncio.TimeoutError:
            log.warning("dropping a client that read nothing for %.0fs", timeout)
            self.drop()
        except (ConnectionError, RuntimeError, OSError):
            self.closed = True

    def drop(self) -> None:
        """Close now, unsent data discarded: what a client that does not read has queued."""
        self.closed = True
        with contextlib.suppress(OSError, RuntimeError):
            self.writer.transport.abort()

    def shutdown(self) -> None:
        self.closed = True
        if self.queue is not None:
            self.server.pushes.subscribers.discard(self.queue)
        if self.pusher:
            self.pusher.cancel()
        for task in self.given_up_without_me:  # no one waits for what they are asking
            task.cancel()
        # Commands already running go on (they are the agent's jobs); only replies are lost.
        with contextlib.suppress(OSError, RuntimeError):
            self.writer.close()
