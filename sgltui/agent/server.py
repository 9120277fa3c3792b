"""The agent's unix-socket API: newline-delimited JSON requests, replies and pushes.

Each request runs as its own task, so a long `swap ... wait=true` does not hold up a `status`
on the same connection, and a reply is written whenever its command finishes (matched by id).
A connection that goes away mid-command is simply forgotten; the command carries on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

from sgltui.agent.supervisor import OpError, Supervisor

log = logging.getLogger("sgltui.agent.server")

MAX_LINE = 8 << 20  # a bench spec or a push is small; a bigger line is a broken client
SUBSCRIBER_QUEUE = 5000  # pushes buffered per client before a non-reading client is dropped


class AgentServer:
    def __init__(self, supervisor: Supervisor, path: Path) -> None:
        self.sup = supervisor
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
        conn = _Conn(self.sup, reader, writer)
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
        self, sup: Supervisor, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.sup, self.reader, self.writer = sup, reader, writer
        self.queue: asyncio.Queue | None = None
        self.tasks: set[asyncio.Task] = set()
        self.pusher: asyncio.Task | None = None
        self.closed = False

    async def run(self) -> None:
        while True:
            try:
                raw = await self.reader.readline()
            except (asyncio.LimitOverrunError, ValueError):
                await self.send({"id": None, "ok": False, "error": "request line too long"})
                return
            if not raw:
                return
            try:
                req = json.loads(raw)
                if not isinstance(req, dict):
                    raise ValueError
            except ValueError:
                await self.send(
                    {
                        "id": None,
                        "ok": False,
                        "error": "bad request: one JSON object per line expected",
                    }
                )
                continue
            t = asyncio.get_running_loop().create_task(self.dispatch(req))
            self.tasks.add(t)
            t.add_done_callback(self.tasks.discard)

    async def dispatch(self, req: dict) -> None:
        rid = req.get("id")
        op = req.get("op")
        args = req.get("args") or {}
        client = req.get("client")
        client = str(client)[:120] if client is not None else None
        if not isinstance(op, str) or not isinstance(args, dict):
            await self.send(
                {
                    "id": rid,
                    "ok": False,
                    "error": "bad request: 'op' (string) and 'args' (object) expected",
                }
            )
            return
        try:
            result: Any = await self.sup.handle(op, args, client)
            if op == "subscribe":
                self.subscribe()
            reply = {"id": rid, "ok": True, "result": result}
        except OpError as exc:
            reply = {"id": rid, "ok": False, "error": str(exc)}
        except Exception as exc:
            log.exception("op %s failed", op)
            reply = {
                "id": rid,
                "ok": False,
                "error": f"internal error in {op}: {type(exc).__name__}: {exc}",
            }
        await self.send(reply)

    def subscribe(self) -> None:
        if self.queue is not None:
            return
        self.queue = asyncio.Queue(maxsize=SUBSCRIBER_QUEUE)
        self.sup.subscribers.add(self.queue)
        self.pusher = asyncio.get_running_loop().create_task(self.push_loop())

    async def push_loop(self) -> None:
        assert self.queue is not None
        while not self.closed:
            if getattr(self.queue, "overflowed", False) and self.queue.empty():
                log.warning("dropping a client that stopped reading pushes")
                self.writer.close()
                return
            msg = await self.queue.get()
            await self.send(msg)

    async def send(self, obj: dict) -> None:
        if self.closed:
            return
        try:
            self.writer.write(json.dumps(obj, default=str).encode() + b"\n")
            await self.writer.drain()
        except (ConnectionError, RuntimeError, OSError):
            self.closed = True

    def shutdown(self) -> None:
        self.closed = True
        if self.queue is not None:
            self.sup.subscribers.discard(self.queue)
        if self.pusher:
            self.pusher.cancel()
        # Commands already running go on (they are the agent's jobs); only replies are lost.
        try:
            self.writer.close()
        except Exception:
            pass
