"""The HTTP surface of the simulator (SGLang's sglang/srt/entrypoints/http_server.py), served with aiohttp.

Access lines are logged as uvicorn prints them, auth follows SGLang's rules (health, ready and
metrics always open; admin endpoints need the admin key when one is set), and error bodies use
SGLang's `{"object": "error", ...}` shape with validation failures as 400, not 422.

Here: the app (routes, access log, auth) and generation (/generate, /v1/completions,
/v1/chat/completions); health and info are sim/http_info.py, admin sim/http_admin.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import http
import json
import logging
import time

from aiohttp import web

from sgltui.core import api_auth as auth
from sgltui.sim import api_bodies as rq
from sgltui.sim.http_admin import AdminApi
from sgltui.sim.http_errors import error_body
from sgltui.sim.http_info import InfoApi

log = logging.getLogger("sglang")
# aiohttp's own error logs (e.g. writes to a client that left) are not SGLang output.
logging.getLogger("aiohttp").addHandler(logging.NullHandler())

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class Api:
    def __init__(self, server):
        self.s = server  # sgltui.sim.server.SimServer
        self.engine = server.engine
        self.args = server.args
        self.model_name = server.model_name
        self.vocab = server.model.vocab
        excl = self.args.uvicorn_access_log_exclude_prefixes or []
        self.access_exclude = tuple(excl) if isinstance(excl, (list, tuple)) else (str(excl),)
        http_level = (self.args.log_level_http or self.args.log_level or "info").lower()
        self.access_log = http_level in ("debug", "info")
        self._watched: dict = {}  # rid -> (request state, aiohttp request)
        self._gone: set[str] = set()  # rids whose client disconnected
        self.info = InfoApi(server)  # health and info endpoints (sim/http_info.py)
        self.admin = AdminApi(server)  # admin and memory-saver endpoints (sim/http_admin.py)

    # ---- app --------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._access_mw, self._auth_mw], client_max_size=64 << 20
        )
        r = app.router
        for path, fn in (
            ("/health", self.info.health),
            ("/health_generate", self.info.health),
            ("/ready", self.info.ready),
            ("/ping", self.info.ping),
            ("/model_info", self.info.model_info),
            ("/get_model_info", self.info.model_info),
            ("/server_info", self.info.server_info),
            ("/get_server_info", self.info.server_info),
            ("/v1/loads", self.info.loads),
            ("/v1/models", self.info.models),
            ("/v1/models/{model_id:.+}", self.info.model_card),
        ):
            r.add_get(path, fn)
        r.add_route("*", "/flush_cache", self.admin.flush_cache)
        r.add_post("/abort_request", self.admin.abort_request)
        r.add_post("/generate", self.generate)
        r.add_put("/generate", self.generate)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat_completions)
        r.add_post("/pause_generation", self.admin.pause)
        r.add_post("/continue_generation", self.admin.resume)
        r.add_post("/freeze_gc", self.admin.freeze_gc)
        r.add_post("/release_memory_occupation", self.admin.release_memory)
        r.add_post("/resume_memory_occupation", self.admin.resume_memory)
        r.add_route("*", "/{tail:.*}", self.fallback)
        app.on_startup.append(self._start_watcher)
        return app

    async def _start_watcher(self, app) -> None:
        app["disconnect_watcher"] = asyncio.get_running_loop().create_task(self.watch_disconnects())

    @web.middleware
    async def _access_mw(self, request: web.Request, handler):
        status = 500
        try:
            resp = await handler(request)
            status = resp.status
            return resp
        except ConnectionResetError:
            status = 499  # the client went away; its request was aborted
            return web.Response(status=499)
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            path = request.rel_url.path
            if self.access_log and not (
                self.access_exclude and path.startswith(self.access_exclude)
            ):
                peer = request.transport.get_extra_info("peername") if request.transport else None
                client = f"{peer[0]}:{peer[1]}" if peer else "-"
                try:
                    phrase = http.HTTPStatus(status).phrase
                except ValueError:
                    phrase = ""
                log.info(
                    f'INFO:     {client} - "{request.method} {request.rel_url} HTTP/'
                    f'{request.version.major}.{request.version.minor}" {status} {phrase}'
                )

    @web.middleware
    async def _auth_mw(self, request: web.Request, handler):
        refused = auth.decide(
            request.method,
            request.rel_url.path,
            request.headers.get("Authorization"),
            request.headers.get("x-api-key"),
            self.args.api_key,
            self.args.admin_api_key,
        )
        if refused is not None:
            error = "Unauthorized" if refused == 401 else "Forbidden"
            return web.json_response({"error": error}, status=refused)
        return await handler(request)

    async def fallback(self, request: web.Request):
        if request.rel_url.path.startswith("/metrics") and self.s.metrics is not None:
            return await self.info.metrics(request)
        return web.json_response({"detail": "Not Found"}, status=404)

    # ---- generation ----------------------------------------------------------------------------------
    async def _json(self, request) -> dict:
        ctype = request.headers.get("Content-Type", "")
        if "application/json" not in ctype:
            raise rq.BadRequest("Content-Type must be application/json.")
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise rq.BadRequest(f"Invalid JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise rq.BadRequest("The request body must be a JSON object.")
        return body

    def _check_length(self, prompts) -> None:
        ctx = self.s.plan.context_len
        for ids in prompts:
            if len(ids) >= ctx:
                raise rq.BadRequest(
                    f"The input ({len(ids)} tokens) is longer than the model's context length "
                    f"({ctx} tokens)."
                )

    def _submit(self, ids, sampling, streaming, rid=None):
        self.s.requests_handled += 1
        return self.engine.submit(rid, ids, sampling, streaming)

    async def _progress(self, st, request=None):
        """Yield (previous count, current count) each time `stream_interval` new tokens exist.

        A client that goes away aborts its request server-side, as in SGLang: the disconnect
        watcher wakes the request, which aborts it here (non-streaming requests included).
        """
        interval = max(1, int(self.args.stream_interval or 1))
        sent = 0
        if request is not None:
            self._watched[st.rid] = (st, request)
        try:
            while True:
                await st.queue.get()
                if st.finish is None and st.rid in self._gone:
                    self.engine.abort(st.rid)
                    raise ConnectionResetError("client disconnected")
                while not st.queue.empty():
                    st.queue.get_nowait()
                n = len(st.output_ids)
                # Whether this count is the last, taken before the yield: the finish may come
                # while the consumer writes the chunk (a slow client), and then the tokens
                # since and the finish are still to send (the stream ended without them).
                finished = st.finish is not None
                if finished or n - sent >= interval:
                    yield sent, n
                    sent = n
                if finished:
                    return
        finally:
            self._watched.pop(st.rid, None)
            self._gone.discard(st.rid)

    async def watch_disconnects(self) -> None:
        """Once a second, wake requests whose client connection has closed."""
        while True:
            await asyncio.sleep(1.0)
            for rid, (st, request) in list(self._watched.items()):
                if request.transport is None or request.transport.is_closing():
                    self._gone.add(rid)
                    st.queue.put_nowait(0)

    async def generate(self, request):
        try:
            body = await self._json(request)
            prompts, batch = rq.generate_prompts(body, self.vocab)
            sampling = rq.sampling_from_native(body.get("sampling_params"))
            self._check_length(prompts)
        except rq.BadRequest as exc:
            return error_body(str(exc), 400)
        stream = bool(body.get("stream", False))
        rids = body.get("rid")
        if stream and batch:
            return error_body(
                "Streaming a batch of prompts is not supported; send one request per prompt.", 400
            )
        if not batch:
            st = self._submit(prompts[0], sampling, stream, rids if isinstance(rids, str) else None)
            if stream:
                return await self._generate_stream(request, st)
            return web.json_response(await self._generate_one(st, request))
        states = [
            self._submit(
                p, sampling, False, rids[i] if isinstance(rids, list) and i < len(rids) else None
            )
            for i, p in enumerate(prompts)
        ]
        return web.json_response(
            list(await asyncio.gather(*(self._generate_one(st, request) for st in states)))
        )

    async def _generate_one(self, st, request=None) -> dict:
        try:
            async for _ in self._progress(st, request):
                pass
        except asyncio.CancelledError:
            self.engine.abort(st.rid)
            raise
        e2e = time.monotonic() - st.created
        return {
            "text": rq.output_text(st.output_ids, st.finish),
            "output_ids": list(st.output_ids),
            "meta_info": rq.native_meta(st, True, e2e),
        }

    async def _sse(self, request, st, events) -> web.StreamResponse:
        """Send each JSON object of `events` as a server-sent event, then `[DONE]`; a client that
        goes away aborts its request."""
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            self.engine.abort(st.rid)
            raise
        return resp

    def _generate_stream(self, request, st):
        return self._sse(request, st, self._generate_events(request, st))

    async def _generate_events(self, request, st):
        incremental = bool(self.args.incremental_streaming_output)
        sent_text = ""
        async for prev, n in self._progress(st, request):
            finished = st.finish is not None
            text = rq.output_text(st.output_ids[:n], st.finish if finished else None)
            e2e = time.monotonic() - st.created
            if incremental:
                chunk = {"text": text[len(sent_text) :], "output_ids": st.output_ids[prev:n]}
            else:
                chunk = {"text": text, "output_ids": st.output_ids[:n]}
            sent_text = text
            chunk["meta_info"] = rq.native_meta(st, finished, e2e)
            yield chunk

    async def completions(self, request):
        try:
            body = await self._json(request)
            prompts = rq.completion_prompts(body, self.vocab)
            sampling = rq.sampling_from_openai(body, chat=False)
            self._check_length(prompts)
        except rq.BadRequest as exc:
            return error_body(str(exc), 400)
        if len(prompts) > 1 and body.get("stream"):
            return error_body("Streaming several prompts in one request is not supported.", 400)
        states = [self._submit(p, sampling, bool(body.get("stream"))) for p in prompts]
        if body.get("stream"):
            return await self._openai_stream(request, states[0], body, chat=False)
        results = await asyncio.gather(*(self._generate_one(st, request) for st in states))
        choices = []
        prompt_tok = completion_tok = cached = 0
        for i, (st, res) in enumerate(zip(states, results)):
            reason, matched = rq.finish_reason_openai(st.finish)
            text = res["text"]
            if body.get("echo"):
                text = rq.echo_text(prompts[i]) + text
            choices.append(
                {
                    "index": i,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": reason,
                    "matched_stop": matched,
                }
            )
            prompt_tok += res["meta_info"]["prompt_tokens"]
            completion_tok += res["meta_info"]["completion_tokens"]
            cached += res["meta_info"]["cached_tokens"]
        return web.json_response(
            {
                "id": states[0].rid,
                "object": "text_completion",
                "created": rq.now(),
                "model": self.model_name,
                "choices": choices,
                "usage": rq.usage(
                    prompt_tok, completion_tok, cached, bool(self.args.enable_cache_report)
                ),
            }
        )

    async def chat_completions(self, request):
        try:
            body = await self._json(request)
            ids = rq.chat_prompt(body, self.vocab)
            sampling = rq.sampling_from_openai(body, chat=True)
            self._check_length([ids])
        except rq.BadRequest as exc:
            return error_body(str(exc), 400)
        if sampling["max_new_tokens"] is None:
            sampling["max_new_tokens"] = max(1, min(self.s.plan.context_len - len(ids), 1 << 20))
        st = self._submit(ids, sampling, bool(body.get("stream")))
        if body.get("stream"):
            return await self._openai_stream(request, st, body, chat=True)
        res = await self._generate_one(st, request)
        reason, matched = rq.finish_reason_openai(st.finish)
        meta = res["meta_info"]
        return web.json_response(
            {
                "id": st.rid,
                "object": "chat.completion",
                "created": rq.now(),
                "model": self.model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": res["text"],
                            "reasoning_content": None,
                            "tool_calls": None,
                        },
                        "logprobs": None,
                        "finish_reason": reason,
                        "matched_stop": matched,
                    }
                ],
                "usage": rq.usage(
                    meta["prompt_tokens"],
                    meta["completion_tokens"],
                    meta["cached_tokens"],
                    bool(self.args.enable_cache_report),
                ),
            }
        )

    def _openai_stream(self, request, st, body: dict, chat: bool):
        return self._sse(request, st, self._openai_events(request, st, body, chat))

    async def _openai_events(self, request, st, body: dict, chat: bool):
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage")) or bool(
            self.args.stream_response_default_include_usage
        )
        created = rq.now()
        obj = "chat.completion.chunk" if chat else "text_completion"

        def envelope(choices: list, usage) -> dict:
            return {
                "id": st.rid,
                "object": obj,
                "created": created,
                "model": self.model_name,
                "choices": choices,
                "usage": usage,
            }

        def chunk(delta_text, reason=None, matched=None, first=False):
            if not chat:
                content: dict = {"text": delta_text}
            elif first:
                content = {"delta": {"role": "assistant", "content": delta_text}}
            else:
                content = {"delta": {"content": delta_text}}
            choice = {
                "index": 0,
                **content,
                "logprobs": None,
                "finish_reason": reason,
                "matched_stop": matched,
            }
            return envelope([choice], None)

        sent_text = ""
        if chat:
            yield chunk("", first=True)
        async for _prev, n in self._progress(st, request):
            finished = st.finish is not None
            text = rq.output_text(st.output_ids[:n], st.finish if finished else None)
            delta = text[len(sent_text) :]
            sent_text = text
            if delta:
                yield chunk(delta)
            if finished:
                reason, matched = rq.finish_reason_openai(st.finish)
                yield chunk("", reason, matched)
        if include_usage:
            meta = rq.native_meta(st, True, None)
            yield envelope(
                [],
                rq.usage(
                    meta["prompt_tokens"],
                    meta["completion_tokens"],
                    meta["cached_tokens"],
                    bool(self.args.enable_cache_report),
                ),
            )


def iso_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()
