"""A loopback SSE mock server that counts the tokens it actually emits.

The load generator's self-test: measured tok/s must match what the server
says it sent. It speaks just enough of SGLang's streaming APIs (/v1/completions,
/v1/chat/completions, /generate, /v1/models, /flush_cache, /health) and reports its own count at
GET /mock/stats. `--tick 0` streams as fast as the event loop allows.

    python tests/support/mock_server.py --port 30000 [--tick 0.02] [--tokens-per-chunk 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from aiohttp import web

from sgltui.bench.apis import dumps, loads


class Counters:
    def __init__(self) -> None:
        self.tokens = 0
        self.requests = 0
        self.seen = 0
        self.in_flight = 0
        self.peak_in_flight = 0


def make_app(tick: float, tokens_per_chunk: int, fail_every: int = 0) -> web.Application:
    counters = Counters()

    async def stream(request: web.Request) -> web.StreamResponse:
        kind = request.path
        counters.seen += 1
        if fail_every and counters.seen % fail_every == 0:
            return web.json_response(
                {"object": "error", "message": "mock failure", "type": "BadRequest", "code": 400},
                status=400,
            )
        body = loads(await request.read())
        if kind == "/generate":
            n_out = int(body.get("sampling_params", {}).get("max_new_tokens", 16))
            prompt = body.get("text") or ""
        else:
            n_out = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            prompt = body.get("prompt") or json.dumps(body.get("messages", ""))
        n_in = max(1, len(str(prompt).split()))
        usage_opt = body.get("stream_options") or {}
        continuous = bool(usage_opt.get("continuous_usage_stats"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        counters.requests += 1
        counters.in_flight += 1
        counters.peak_in_flight = max(counters.peak_in_flight, counters.in_flight)
        try:
            if kind == "/v1/chat/completions":
                await resp.write(
                    b"data: "
                    + dumps({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
                    + b"\n\n"
                )
            sent = 0
            while sent < n_out:
                k = min(tokens_per_chunk, n_out - sent)
                sent += k
                last = sent >= n_out
                chunk: dict[str, Any]
                if kind == "/generate":
                    chunk = {
                        "text": "tok " * sent,
                        "meta_info": {
                            "id": "m",
                            "prompt_tokens": n_in,
                            "completion_tokens": sent,
                            "cached_tokens": 0,
                            "finish_reason": {"type": "length", "length": n_out} if last else None,
                        },
                    }
                else:
                    choice: dict[str, Any]
                    if kind == "/v1/chat/completions":
                        choice = {
                            "index": 0,
                            "delta": {"content": "tok " * k},
                            "finish_reason": "length" if last else None,
                        }
                    else:
                        choice = {
                            "index": 0,
                            "text": "tok " * k,
                            "finish_reason": "length" if last else None,
                        }
                    chunk = {
                        "id": "m",
                        "object": "chunk",
                        "choices": [choice],
                        "usage": {
                            "prompt_tokens": n_in,
                            "completion_tokens": sent,
                            "total_tokens": n_in + sent,
                        }
                        if continuous
                        else None,
                    }
                await resp.write(b"data: " + dumps(chunk) + b"\n\n")
                counters.tokens += k
                if tick > 0:
                    await asyncio.sleep(tick)
                else:
                    await asyncio.sleep(0)
            if kind != "/generate" and usage_opt.get("include_usage"):
                await resp.write(
                    b"data: "
                    + dumps(
                        {
                            "id": "m",
                            "choices": [],
                            "usage": {
                                "prompt_tokens": n_in,
                                "completion_tokens": n_out,
                                "total_tokens": n_in + n_out,
                            },
                        }
                    )
                    + b"\n\n"
                )
            await resp.write(b"data: [DONE]\n\n")
        finally:
            counters.in_flight -= 1
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": "mock-model", "object": "model"}]}
        )

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "tokens": counters.tokens,
                "requests": counters.requests,
                "in_flight": counters.in_flight,
                "peak_in_flight": counters.peak_in_flight,
                "ts": time.time(),
            }
        )

    async def server_info(request: web.Request) -> web.Response:
        return web.json_response(
            {"version": "mock", "max_running_requests": None, "internal_states": [{}]}
        )

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.\n")

    app = web.Application()
    for path in ("/v1/completions", "/v1/chat/completions", "/generate"):
        app.router.add_post(path, stream)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/mock/stats", stats)
    app.router.add_get("/server_info", server_info)
    app.router.add_get("/health", ok)
    app.router.add_post("/flush_cache", ok)
    return app


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests/support/mock_server.py")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tick", type=float, default=0.0, help="seconds between chunks of one stream")
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument(
        "--fail-every", type=int, default=0, help="answer every Nth request with HTTP 400"
    )
    args = p.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    try:
        # run_app turns SIGTERM/SIGINT into a clean shutdown itself
        web.run_app(
            make_app(args.tick, args.tokens_per_chunk, args.fail_every),
            host=args.host,
            port=args.port,
            print=None,
            access_log=None,
            backlog=4096,
        )
    except OSError as exc:
        print(
            f"mock server: cannot listen on {args.host}:{args.port}: {exc.strerror}; pick a free --port",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
