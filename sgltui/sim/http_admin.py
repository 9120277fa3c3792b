"""The simulator's admin endpoints: /flush_cache, /abort_request, /freeze_gc, pause and continue
generation, and the memory saver's release and resume (sim/memory_saver.py does the work)."""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web

from sgltui.sim.http_errors import error_body
from sgltui.sim.memory_saver import parse_tags

log = logging.getLogger("sglang")


class AdminApi:
    """Handlers of the admin routes Api.app() registers (sim/http_api.py)."""

    def __init__(self, server: Any) -> None:
        self.s = server  # sgltui.sim.server.SimServer
        self.engine = server.engine
        self.args = server.args
        self.model_name = server.model_name

    async def flush_cache(self, request):
        try:
            timeout = float(request.rel_url.query.get("timeout", 0) or 0)
        except ValueError:
            return web.Response(text="timeout must be a number of seconds.", status=400)
        # The scheduler waits for idle inside its own loop (requests and hicache copies in
        # flight); the paused loop never retires hicache copies, so a paused one times out.
        ok = await self.engine.flush_cache(timeout)
        if not ok:
            text = "Timed out waiting for idle state." if timeout > 0 else "Flush cache failed."
            return web.Response(text=text, status=400)
        log.info("Cache flushed successfully!")
        return web.Response(
            text="Cache flushed.\nPlease check backend logs for more details. (When there are "
            "running or waiting requests, the operation will not be performed.)\n"
        )

    async def abort_request(self, request):
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = {}
        if body.get("abort_all"):
            self.engine.abort(None)
        elif body.get("rid"):
            self.engine.abort(str(body["rid"]))
        return web.Response(status=200)

    async def _body(self, request) -> dict:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {}
        return body if isinstance(body, dict) else {}

    async def pause(self, request):
        mode = str((await self._body(request)).get("mode") or "abort")
        if mode not in ("abort", "retract", "in_place"):
            return error_body(f"mode must be abort, retract or in_place, not {mode!r}", 400)
        await self.s.saver.pause(mode)
        return web.json_response({"message": "Generation paused successfully.", "status": "ok"})

    async def resume(self, request):
        await self.s.saver.resume_generation()
        return web.json_response({"message": "Generation continued successfully.", "status": "ok"})

    async def release_memory(self, request):
        try:
            tags = parse_tags(await self._body(request))
        except ValueError as exc:
            return error_body(str(exc), 400)
        await self.s.saver.release(tags)
        return web.json_response(None)

    async def resume_memory(self, request):
        try:
            tags = parse_tags(await self._body(request))
        except ValueError as exc:
            return error_body(str(exc), 400)
        await self.s.saver.resume(tags)
        return web.json_response(None)

    async def freeze_gc(self, request):
        return web.json_response({"status": "ok"})
