"""GET a server's /server_info with an overall deadline and a byte cap (issue 51).

httpx's timeout bounds each read, not the answer: a server that drips one byte a second held an
attach (and, under the agent's lock then, every attach, detach and `agent stop`) for as long as
it dripped, and a 200 MB body was read whole. Here the whole answer has a deadline and a size
cap, and the body is decoded with a depth bound and its keys coerced (core/info_bounds.py).

`fetch` is for the agent's loop (cancelled with its caller: a client that leaves gives it up);
`fetch_blocking` for worker threads (discovery's scan) and the CLI.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from sgltui.core.info_bounds import InfoError, decode

DEADLINE_S = 10.0  # SGLang answers /server_info in milliseconds (it asks each scheduler)
MAX_BYTES = 4 << 20  # SGLang's is tens of KB


class FetchError(Exception):
    """Why no /server_info came (one line); `status` is the HTTP status when one came;
    `unanswered` when nothing answered at all (refused, reset, timed out before a status)."""

    def __init__(self, why: str, status: int | None = None, unanswered: bool = False) -> None:
        super().__init__(why)
        self.status = status
        self.unanswered = unanswered

    @property
    def needs_key(self) -> bool:
        return self.status in (401, 403)


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _check(status: int, length: str | None, max_bytes: int) -> None:
    if status != 200:
        raise FetchError(f"/server_info answered {status}", status)
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise FetchError(f"/server_info is larger than {max_bytes >> 20} MB (not SGLang?)")


def _too_big(max_bytes: int) -> FetchError:
    return FetchError(f"/server_info is larger than {max_bytes >> 20} MB (not SGLang?)")


def _too_slow(deadline_s: float) -> FetchError:
    return FetchError(f"/server_info did not come whole within {deadline_s:.0f}s")


async def fetch(
    url: str,
    api_key: str | None,
    deadline_s: float = DEADLINE_S,
    max_bytes: int = MAX_BYTES,
) -> dict[str, Any]:
    """`url`'s /server_info, bounded and coerced, or FetchError."""
    body = bytearray()

    async def read() -> None:
        async with httpx.AsyncClient(trust_env=False, timeout=deadline_s) as client:
            req = client.build_request("GET", url + "/server_info", headers=_headers(api_key))
            r = await client.send(req, stream=True)
            try:
                _check(r.status_code, r.headers.get("content-length"), max_bytes)
                async for chunk in r.aiter_bytes():
                    body.extend(chunk)
                    if len(body) > max_bytes:
                        raise _too_big(max_bytes)
            finally:
                await r.aclose()

    try:
        await asyncio.wait_for(read(), deadline_s)
    except asyncio.TimeoutError:
        raise _too_slow(deadline_s) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise FetchError(f"no answer ({type(exc).__name__})", unanswered=True) from None
    return _decoded(bytes(body))


def fetch_blocking(
    url: str,
    api_key: str | None,
    deadline_s: float = DEADLINE_S,
    max_bytes: int = MAX_BYTES,
) -> dict[str, Any]:
    """`fetch` for a worker thread: each read waits at most what is left of the deadline."""
    end = time.monotonic() + deadline_s
    body = bytearray()
    try:
        with httpx.Client(trust_env=False, timeout=deadline_s) as client:
            with client.stream("GET", url + "/server_info", headers=_headers(api_key)) as r:
                _check(r.status_code, r.headers.get("content-length"), max_bytes)
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise _too_big(max_bytes)
                    if time.monotonic() > end:
                        raise _too_slow(deadline_s)
    except httpx.TimeoutException:
        raise _too_slow(deadline_s) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise FetchError(f"no answer ({type(exc).__name__})", unanswered=True) from None
    return _decoded(bytes(body))


def _decoded(body: bytes) -> dict[str, Any]:
    try:
        return decode(body)
    except InfoError as exc:
        raise FetchError(str(exc)) from None
