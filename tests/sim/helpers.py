"""Shared helpers for the simulator tests: a module-wide server and SSE parsing."""

from __future__ import annotations

import json

import httpx


def sse_events(resp: httpx.Response) -> list:
    """The `data:` payloads of an SSE response, JSON-decoded except the final [DONE]."""
    out = []
    for line in resp.iter_lines():
        if not line.startswith("data: "):
            assert line == "", f"unexpected SSE line {line!r}"
            continue
        data = line[len("data: ") :]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def post_json(url: str, body: dict, **kw) -> httpx.Response:
    return httpx.post(url, json=body, timeout=30, **kw)
