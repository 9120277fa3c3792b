"""SSE splitting and chunk readers: only content chunks count, token counts come from usage."""

from __future__ import annotations

import json

import pytest

from sgltui.bench.apis import SSESplitter, StreamError, make_reader, request_body


def test_sse_splitter_handles_split_reads_comments_and_crlf():
    s = SSESplitter()
    assert s.feed(b'data: {"a": 1}\n\ndata: {"b"') == [b'{"a": 1}']
    assert s.feed(b": 2}\n\n: keep-alive comment\n\ndata: [DONE]\r\n\r\n") == [
        b'{"b": 2}',
        b"[DONE]",
    ]
    assert s.feed(b"") == []


def test_chat_reader_skips_role_only_and_usage_chunks():
    r = make_reader("chat")
    assert r.feed({"choices": [{"delta": {"role": "assistant"}}]}) == 0
    assert r.feed({"choices": [{"delta": {"content": ""}}]}) == 0
    assert r.feed({"choices": [{"delta": {"content": "Hi"}}]}) == 1
    assert (
        r.feed(
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 7,
                    "completion_tokens": 5,
                    "prompt_tokens_details": {"cached_tokens": 3},
                },
            }
        )
        == 0
    )
    assert r.output_tokens() == (5, True)
    assert r.prompt_tokens == 7 and r.cached_tokens == 3


def test_continuous_usage_weights_multi_token_chunks():
    r = make_reader("completions")
    assert r.feed({"choices": [{"text": "a"}], "usage": {"completion_tokens": 1}}) == 1
    assert r.feed({"choices": [{"text": "bcd"}], "usage": {"completion_tokens": 4}}) == 3
    assert r.output_tokens() == (4, True)


def test_missing_usage_is_flagged():
    r = make_reader("completions")
    r.feed({"choices": [{"text": "a"}]})
    r.feed({"choices": [{"text": "b"}]})
    assert r.output_tokens() == (2, False)


def test_generate_reader_uses_cumulative_meta_info():
    r = make_reader("generate")
    assert r.feed({"text": "a", "meta_info": {"completion_tokens": 2, "prompt_tokens": 9}}) == 2
    assert r.feed({"text": "ab", "meta_info": {"completion_tokens": 2}}) == 0
    assert (
        r.feed(
            {
                "text": "abc",
                "meta_info": {"completion_tokens": 5, "finish_reason": {"type": "length"}},
            }
        )
        == 3
    )
    assert r.output_tokens() == (5, True)
    with pytest.raises(StreamError, match="aborted"):
        make_reader("generate").feed(
            {
                "meta_info": {
                    "completion_tokens": 0,
                    "finish_reason": {"type": "abort", "message": "queue full"},
                }
            }
        )


def test_stream_error_event_raises():
    with pytest.raises(StreamError, match="bad prompt"):
        make_reader("chat").feed(
            {"error": {"message": "bad prompt", "type": "invalid_request_error"}}
        )


def test_request_bodies_ask_for_usage_and_stream():
    body = json.loads(request_body("completions", "hi", 12, "m"))
    assert body["stream"] and body["stream_options"]["include_usage"] and body["max_tokens"] == 12
    chat = json.loads(request_body("chat", "hi", 3, "m"))
    assert chat["messages"] == [{"role": "user", "content": "hi"}]
    gen = json.loads(request_body("generate", "hi", 4, None))
    assert gen["sampling_params"]["max_new_tokens"] == 4 and gen["stream"] and gen["text"] == "hi"
