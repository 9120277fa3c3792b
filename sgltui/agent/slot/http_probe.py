"""The agent's HTTP questions to a server it runs (readiness, load during a drain), via httpx.

A handful of GETs during a launch or a drain, each with a hard timeout: a wedged server must
never hang the agent, and a body larger than MAX_BODY is not read on. One client per event loop
keeps its connection (polls come every 0.1 s while draining); proxies from the environment are
ignored, since the server is local.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

MAX_BODY = 1 << 20  # /ready, /model_info and /v1/loads answer a few KB
_clients: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}


def _client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    hit = _clients.get(id(loop))
    if hit is None or hit[0] is not loop or hit[1].is_closed:
        for key, (old_loop, _) in list(_clients.items()):
            if old_loop.is_closed():
                del _clients[key]  # its client's connections died with that loop
        hit = (loop, httpx.AsyncClient(trust_env=False, headers={"User-Agent": "sgltui-agent"}))
        _clients[id(loop)] = hit
    return hit[1]


async def get(
    host: str, port: int, path: str, api_key: str | None = None, timeout: float = 2.0
) -> tuple[int, bytes]:
    """(status, body); status 0 when the server did not answer."""
    connect_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in connect_host:
        connect_host = f"[{connect_host}]"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"http://{connect_host}:{port}{path}"

    async def answer() -> tuple[int, bytes]:
        async with _client().stream("GET", url, headers=headers, timeout=timeout) as r:
            body = bytearray()
            async for chunk in r.aiter_bytes():
                body.extend(chunk)
                if len(body) > MAX_BODY:  # not a probe's answer: its status is all it says
                    return r.status_code, b""
            return r.status_code, bytes(body)

    try:
        # httpx's timeout bounds each phase; wait_for bounds the whole answer (a trickling body).
        return await asyncio.wait_for(answer(), timeout)
    except (httpx.HTTPError, asyncio.TimeoutError):
        return 0, b""


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


async def post(
    host: str,
    port: int,
    path: str,
    body: Any,
    api_key: str | None = None,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """(status, JSON body or None) of a POST; status 0 when the server did not answer in time.
    For the memory saver's endpoints and the canary (agent/swap/standby.py)."""
    connect_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in connect_host:
        connect_host = f"[{connect_host}]"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"http://{connect_host}:{port}{path}"
    try:
        r = await asyncio.wait_for(
            _client().post(url, json=body, headers=headers, timeout=timeout), timeout
        )
    except (httpx.HTTPError, asyncio.TimeoutError):
        return 0, None
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, None
