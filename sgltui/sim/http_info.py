"""The simulator's health and info endpoints: /health (a real generation, as SGLang probes),
/ready, /ping, /model_info, /server_info, /v1/loads, /metrics and /v1/models, answered as
SGLang 0.5.23 answers them."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from aiohttp import web

from sgltui.sim import server_info as bodies

log = logging.getLogger("sglang")


class InfoApi:
    """Handlers of the health and info routes Api.app() registers (sim/http_api.py)."""

    def __init__(self, server: Any) -> None:
        self.s = server  # sgltui.sim.server.SimServer
        self.engine = server.engine
        self.args = server.args
        self.model_name = server.model_name

    # ---- health ------------------------------------------------------------------------------------
    async def health(self, request: web.Request):
        s = self.s
        # An UnHealthy server is probed again: a generation that gets through makes it Up (as
        # SGLang's health_generate does once a paused server continues).
        if s.status not in ("Up", "UnHealthy") or s.draining:
            return web.Response(status=503)
        if request.rel_url.path == "/health" and os.environ.get(
            "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "true"
        ).lower() in ("0", "false"):
            return web.Response(status=200)
        started = time.monotonic()
        rid = f"HEALTH_CHECK_{self.engine.new_rid()}"
        st = self.engine.submit(rid, [0], {"max_new_tokens": 1, "ignore_eos": True}, False)
        timeout = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
        # SGLang polls once a second; the poll is scaled with the rest of the simulated timing.
        poll = 1.0 if s.scale >= 1 else max(0.02, s.scale)
        try:
            while True:
                await asyncio.sleep(poll)
                if st.output_ids or st.finish or self.engine.last_output_at > started:
                    s.status = "Up"
                    return web.Response(status=200)
                if time.monotonic() - started > timeout:
                    tic = time.strftime(
                        "%H:%M:%S", time.localtime(time.time() - (time.monotonic() - started))
                    )
                    last = time.strftime(
                        "%H:%M:%S", time.localtime(self.engine.last_output_wall or time.time())
                    )
                    log.error(
                        f"Health check failed. Server couldn't get a response from detokenizer for last "
                        f"{int(timeout)} seconds. tic start time: {tic}. last_heartbeat time: {last}"
                    )
                    s.status = "UnHealthy"
                    return web.Response(status=503)
        finally:
            if st.finish is None:
                self.engine.abort(rid)
                self.engine.reqs.pop(rid, None)

    async def ready(self, request):
        ok = self.s.status == "Up" and not self.s.draining and not self.s.paused
        return web.Response(status=200 if ok else 503)

    async def ping(self, request):
        return web.Response(status=200 if self.s.status == "Up" else 503)

    # ---- info ----------------------------------------------------------------------------------------
    async def model_info(self, request):
        if request.rel_url.path == "/get_model_info":
            log.warning(
                "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                "Please use '/model_info' instead."
            )
        m = self.s.model
        return web.json_response(
            {
                "model_path": self.args.model_path,
                "served_model_name": self.model_name,
                "tokenizer_path": self.args.tokenizer_path or self.args.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "load_format": "auto",
                "reasoning_parser": None,
                "tool_call_parser": None,
                "disaggregation_mode": "null",
                "has_image_understanding": m.is_multimodal,
                "has_audio_understanding": False,
                "model_type": m.model_type,
                "architectures": list(m.architectures),
            }
        )

    async def server_info(self, request):
        if request.rel_url.path == "/get_server_info":
            log.warning(
                "Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                "Please use '/server_info' instead."
            )
        return web.json_response(bodies.server_info(self.s))

    async def loads(self, request):
        q = request.rel_url.query
        body = bodies.loads(self.s, q.get("include", "core"), q.get("dp_rank"))
        if q.get("format") == "prometheus":
            return web.Response(text=_loads_prometheus(body), content_type="text/plain")
        return web.json_response(body)

    async def metrics(self, request):
        return web.Response(
            body=self.s.metrics.render(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def models(self, request):
        return web.json_response({"object": "list", "data": [self._card()]})

    async def model_card(self, request):
        if request.match_info["model_id"] != self.model_name:
            return web.json_response(
                {
                    "error": {
                        "message": f"The model '{request.match_info['model_id']}' does not exist",
                        "type": "invalid_request_error",
                        "param": "model",
                        "code": "model_not_found",
                    }
                },
                status=404,
            )
        return web.json_response(self._card())

    def _card(self) -> dict:
        return {
            "id": self.model_name,
            "object": "model",
            "created": int(self.s.started_wall),
            "owned_by": "sglang",
            "root": self.model_name,
            "parent": None,
            "max_model_len": self.s.plan.context_len,
        }


def _loads_prometheus(body: dict) -> str:
    lines = []
    seen = set()
    for load in body.get("loads", []):
        rank = load.get("dp_rank", 0)
        for key, val in load.items():
            items = val.items() if isinstance(val, dict) else [(None, val)]
            for sub, v in items:
                if (
                    isinstance(v, bool)
                    or not isinstance(v, (int, float))
                    or key in ("dp_rank", "timestamp")
                ):
                    continue
                name = f"sglang_{key}" if sub is None else f"sglang_{key}_{sub}"
                if name not in seen:
                    lines.append(f"# TYPE {name} gauge")
                    seen.add(name)
                lines.append(f'{name}{{dp_rank="{rank}"}} {v}')
    return "\n".join(lines) + "\n"
