"""Keep-alive HTTP/1.1 GETs to one server: the engine polls (agent/telemetry/engine.py).

Why not httpx, as everywhere else in the agent: each slot's server is polled every second
(an idle one every 3 s), and httpx's layers (transport, connection pool, h11, anyio) cost
several times the request itself; with 8 idle slots, GETs through httpx were about half of the
agent's CPU (issue 39, docs/performance.md). And not aiohttp, which the project depends on
already: bench/bench_http_get.py measures client CPU per GET of a /metrics answer, and aiohttp's
session costs 1.6x this reader (httpx 7x; 87 vs 139 vs 612 us, fourth round). A poll is a
plain GET over loopback or the host's network to a server the agent runs or attached (http
only, no proxy, no redirect), answered with a Content-Length or chunked body (or one that ends
with the connection), so the reader here is small. One connection per server, kept between
polls and opened again when the server closed it.

Errors: ConnectFailed (refused, unreachable), Timeout (no whole answer within the timeout) and
BadAnswer (not HTTP, torn); all are GetError.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlsplit

MAX_BODY = 64 << 20  # an answer larger than this is not a poll's


class GetError(Exception):
    pass


class ConnectFailed(GetError):
    pass


class Timeout(GetError):
    pass


class BadAnswer(GetError):
    pass


class Answer:
    def __init__(self, status_code: int, body: bytes) -> None:
        self.status_code = status_code
        self.content = body

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class KeepAliveGet:
    """GETs to the server at `base_url` (http://host:port), one at a time on one connection."""

    def __init__(self, base_url: str, timeout: float = 3.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{base_url!r}: only http://host:port is polled this way")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = f"{host}:{self.port}"
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._lock = asyncio.Lock()

    @property
    def busy(self) -> bool:
        """A GET is out on it (the next one would wait for that one's answer)."""
        return self._lock.locked()

    async def get(
        self, path: str, headers: dict[str, str] | None = None, timeout: float | None = None
    ) -> Answer:
        async with self._lock:
            try:
                return await asyncio.wait_for(
                    self._get(path, headers or {}), self.timeout if timeout is None else timeout
                )
            except asyncio.TimeoutError:
                self.close()
                raise Timeout("no answer within the timeout") from None
            except BaseException:  # cancelled mid-answer too: the connection's state is unknown
                self.close()
                raise

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn[1].close()
            self._conn = None

    async def aclose(self) -> None:
        self.close()

    async def _get(self, path: str, headers: dict[str, str]) -> Answer:
        head = f"GET {self.prefix}{path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (head + "User-Agent: sgltui-agent\r\nAccept: */*\r\n\r\n").encode("latin-1")
        for _ in range(2):
            kept = self._conn is not None
            if self._conn is None:
                try:
                    self._conn = await asyncio.open_connection(self.host, self.port)
                except OSError as exc:
                    raise ConnectFailed(str(exc) or type(exc).__name__) from None
            reader, writer = self._conn
            try:
                writer.write(request)
                status_line = await reader.readline()
                if not status_line and kept:
                    raise ConnectionResetError("the kept connection was closed")
                return await self._answer(status_line, reader)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                self.close()
                if not kept:  # a new connection that failed: the server's doing, say so
                    raise BadAnswer(f"connection lost: {exc or type(exc).__name__}") from None
                # A kept connection the server had closed (idle timeout): once more, anew.
            except (ValueError, asyncio.LimitOverrunError) as exc:
                raise BadAnswer(str(exc)) from None
        raise BadAnswer("the server closed the connection twice")

    async def _answer(self, status_line: bytes, reader: asyncio.StreamReader) -> Answer:
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise BadAnswer(f"not an HTTP answer: {status_line[:80]!r}")
        status = int(parts[1])
        length: int | None = None
        chunked = close = False
        while True:
            line = await reader.readline()
            if not line:
                raise asyncio.IncompleteReadError(b"", None)
            line = line.strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value
            elif name == b"connection":
                close = b"close" in value
        if parts[0] == b"HTTP/1.0":
            close = True
        if chunked:
            body = await self._chunks(reader)
        elif length is not None:
            if length > MAX_BODY:
                raise BadAnswer(f"an answer of {length} bytes")
            body = await reader.readexactly(length)
        elif status in (204, 304) or 100 <= status < 200:
            body = b""
        else:  # the body ends with the connection
            body = await reader.read(MAX_BODY)
            close = True
        if close:
            self.close()
        return Answer(status, body)

    async def _chunks(self, reader: asyncio.StreamReader) -> bytes:
        out = bytearray()
        while True:
            size_line = await reader.readline()
            if not size_line:
                raise asyncio.IncompleteReadError(bytes(out), None)
            size = int(size_line.split(b";", 1)[0].strip() or b"x", 16)
            if size == 0:
                while (await reader.readline()).strip():  # trailers, then the blank line
                    pass
                return bytes(out)
            if len(out) + size > MAX_BODY:
                raise BadAnswer("an answer over the size limit")
            out += await reader.readexactly(size)
            await reader.readexactly(2)  # CRLF after each chunk
