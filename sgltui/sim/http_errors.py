"""SGLang's error body for the simulator's HTTP API: `{"object": "error", ...}`, with
validation failures as 400 (not FastAPI's 422)."""

from __future__ import annotations

import http

from aiohttp import web


def error_body(message: str, status: int, kind: str | None = None) -> web.Response:
    phrase = http.HTTPStatus(status).phrase.replace(" ", "")
    return web.json_response(
        {
            "object": "error",
            "message": message,
            "type": kind or phrase,
            "param": None,
            "code": status,
        },
        status=status,
    )
