"""Tiny HTTP/1.1 GETs for readiness and drain checks, on asyncio streams.

Kept dependency-free and one-shot (Connection: close): the agent asks a server a handful of
questions during a launch or a drain, not a stream of them, and must never hang on a wedged
server, so every call has a hard timeout.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


async def get(
    host: str, port: int, path: str, api_key: str | None = None, timeout: float = 2.0
) -> tuple[int, bytes]:
    """(status, body); status 0 when the server did not answer."""
    connect_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    try:
        return await asyncio.wait_for(_get(connect_host, port, path, api_key), timeout)
    except (OSError, asyncio.TimeoutError, ValueError, IndexError):
        return 0, b""


async def _get(host: str, port: int, path: str, api_key: str | None) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        headers = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Connection: close",
            "User-Agent: sgltui-agent",
        ]
        if api_key:
            headers.append(f"Authorization: Bearer {api_key}")
        writer.write(("\r\n".join(headers) + "\r\n\r\n").encode())
        await writer.drain()
        raw = await reader.read(-1)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        body = _unchunk(body)
    return status, body


def _unchunk(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out


async def ready(host: str, port: int, api_key: str | None, fallback: bool = True) -> bool:
    """The cheap readiness probe: /ready (0.5.23), else (`fallback`) /model_info (older, which
    answers as soon as the HTTP server is up, so only meaningful after the ready line). Never
    /health."""
    status, _ = await get(host, port, "/ready", api_key, timeout=1.0)
    if status == 200:
        return True
    if fallback and status in (404, 405):
        status, _ = await get(host, port, "/model_info", api_key)
        return status == 200
    return False


async def load(host: str, port: int, api_key: str | None) -> int | None:
    """Requests running + waiting, from /v1/loads; None when the server does not say."""
    status, body = await get(host, port, "/v1/loads", api_key)
    if status != 200:
        return None
    try:
        data: Any = json.loads(body)
        return sum(
            int(r.get("num_running_reqs", 0)) + int(r.get("num_waiting_reqs", 0))
            for r in data.get("loads", [])
        )
    except (ValueError, AttributeError, TypeError):
        return None
