"""Shared helpers for the simulator tests: SSE parsing, requests in one line."""

from __future__ import annotations

import json
import threading

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


def gen_body(max_new_tokens: int, **fields) -> dict:
    """A native /generate body that runs to max_new_tokens (EOS ignored)."""
    return {"sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": True}, **fields}


def stream_events(url: str, body: dict, timeout: float = 30) -> list:
    """POST `body` with streaming on; the SSE events, the last one "[DONE]"."""
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=timeout) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        return sse_events(r)


def stream_in_background(
    url: str, body: dict, timeout: float = 60
) -> tuple[threading.Thread, list]:
    """stream_events in a thread: (the thread, the list its events are added to)."""
    events: list = []
    t = threading.Thread(target=lambda: events.extend(stream_events(url, body, timeout)))
    t.start()
    return t, events


def qwen36(gpu: str) -> tuple[str, ...]:
    """The simulator flags for Qwen3.6-27B (hybrid GDN, MTP head, vision tower) on `gpu`."""
    return ("--model-path", "Qwen/Qwen3.6-27B", "--sim-gpu", gpu)
