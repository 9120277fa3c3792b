"""The three streaming APIs the load generator speaks, and how to read their SSE chunks.

Token counts come from the server (`usage` with `stream_options.include_usage`, or `/generate`
`meta_info.completion_tokens`), never from counting chunks (a chunk may carry several tokens). A chunk only
counts as a token arrival when it carries non-empty content: role-only deltas, the trailing
usage event and `[DONE]` do not.
"""

from __future__ import annotations

from typing import Any

import orjson

# orjson parses a chunk several times faster than the stdlib (a declared dependency).
loads = orjson.loads
dumps = orjson.dumps


APIS = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
    "generate": "/generate",
}


class StreamError(Exception):
    """The server reported an error inside the stream."""


def request_body(
    api: str,
    prompt: str | list,
    output_len: int,
    model: str | None,
    ignore_eos: bool = True,
    temperature: float = 0.0,
) -> bytes:
    """JSON body of one streaming request; `prompt` is text, or chat messages for "chat"."""
    if api == "generate":
        text = prompt if isinstance(prompt, str) else _messages_text(prompt)
        return dumps(
            {
                "text": text,
                "sampling_params": {
                    "max_new_tokens": output_len,
                    "temperature": temperature,
                    "ignore_eos": ignore_eos,
                },
                "stream": True,
            }
        )
    # continuous_usage_stats puts a running completion_tokens in every chunk, so chunks that
    # carry several tokens (speculative decoding, --stream-interval > 1) are weighted right.
    body: dict[str, Any] = {
        "model": model or "default",
        "max_tokens": output_len,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "ignore_eos": ignore_eos,
    }
    if api == "chat":
        body["messages"] = (
            prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        )
    else:
        body["prompt"] = prompt if isinstance(prompt, str) else _messages_text(prompt)
    return dumps(body)


def _messages_text(messages: list) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))


class ChunkReader:
    """Reads one request's chunks; `feed` returns how many tokens the chunk delivered (0 = none)."""

    __slots__ = ("counted", "server_tokens", "prompt_tokens", "cached_tokens", "finish_reason")

    def __init__(self) -> None:
        self.counted = 0  # tokens attributed to content chunks so far
        self.server_tokens = -1  # completion_tokens from the server; -1 = not reported
        self.prompt_tokens = -1
        self.cached_tokens = 0
        self.finish_reason: Any = None

    def output_tokens(self) -> tuple[int, bool]:
        """(output tokens, whether the server reported them)."""
        if self.server_tokens >= 0:
            return self.server_tokens, True
        return self.counted, False

    def feed(self, obj: dict) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _usage(self, usage: dict) -> int:
        ct = usage.get("completion_tokens")
        if ct is not None:
            self.server_tokens = ct
        pt = usage.get("prompt_tokens")
        if pt is not None:
            self.prompt_tokens = pt
        details = usage.get("prompt_tokens_details")
        if details and details.get("cached_tokens"):
            self.cached_tokens = details["cached_tokens"]
        return ct if ct is not None else -1


class OpenAIReader(ChunkReader):
    __slots__ = ("delta_key",)

    def __init__(self, chat: bool) -> None:
        super().__init__()
        self.delta_key = chat

    def feed(self, obj: dict) -> int:
        err = obj.get("error")
        if err:
            raise StreamError(_error_text(err))
        usage = obj.get("usage")
        ct = self._usage(usage) if usage else -1
        choices = obj.get("choices")
        if not choices:
            return 0
        choice = choices[0]
        if self.delta_key:
            delta = choice.get("delta") or {}
            content = delta.get("content") or delta.get("reasoning_content")
        else:
            content = choice.get("text")
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice.get("finish_reason")
        if not content:
            return 0
        n = ct - self.counted if ct > self.counted else 1
        self.counted += n
        return n


class GenerateReader(ChunkReader):
    """Native /generate: meta_info.completion_tokens is cumulative in every chunk."""

    def feed(self, obj: dict) -> int:
        err = obj.get("error")
        if err:
            raise StreamError(_error_text(err))
        meta = obj.get("meta_info") or {}
        ct = meta.get("completion_tokens")
        if meta.get("prompt_tokens") is not None:
            self.prompt_tokens = meta["prompt_tokens"]
        if meta.get("cached_tokens"):
            self.cached_tokens = meta["cached_tokens"]
        fr = meta.get("finish_reason")
        if fr is not None:
            self.finish_reason = fr
            if isinstance(fr, dict) and fr.get("type") == "abort":
                raise StreamError(f"aborted by server: {fr.get('message') or 'no reason given'}")
        if ct is None:
            return 0
        self.server_tokens = ct
        n = ct - self.counted
        if n <= 0:
            return 0
        self.counted = ct
        return n


def make_reader(api: str) -> ChunkReader:
    if api == "generate":
        return GenerateReader()
    return OpenAIReader(chat=(api == "chat"))


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


class SSESplitter:
    """Splits raw stream bytes into SSE `data:` payloads (events end with a blank line).

    Works on raw chunks rather than lines: one `split` per network read is far cheaper than a
    line iterator.
    """

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self.buf + chunk if self.buf else chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        parts = buf.split(b"\n\n")
        self.buf = parts.pop()
        out = []
        for event in parts:
            if event.startswith(b"data:") and b"\n" not in event:
                out.append(event[5:].strip())
                continue
            data = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
            if data:
                out.append(b"\n".join(data))
        return out
