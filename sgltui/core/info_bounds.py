"""A server's `/server_info`, coerced and bounded before anything of ours reads it (issue 51).

A server sgltui did not start may answer anything: `version: {}`, `model_path: [...]`,
`tp_size: 1e308`, `context_length: -5`, a body nested 100,000 deep. What it says ends up in
protocol Structs (a slot's `external.version`), in the status every client reads, in capacity
cards and provenance hashes; one wrong type there failed `sgltui status` for every client until
the server was detached. So the JSON is decoded with a depth bound, and the keys sgltui reads are
given the type it expects, within sane bounds, or left out (unknown, as if the server had not
said). The rest is kept as sent (it is recorded as the server's arguments), with every string cut
and every number a JSON number that msgspec and `json` can carry.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 32  # SGLang's /server_info nests 4 deep (internal_states[0].memory_usage.graph)
MAX_TEXT = 4096  # a model path, a launch command: longer is not a server's
MAX_INT = 1 << 53  # beyond this a number is not a count (and not exact as a JSON double)

# key -> (smallest, largest): counts and sizes sgltui reads, as whole numbers in that range.
INT_KEYS: dict[str, tuple[int, int]] = {
    "tp_size": (1, 1024),
    "dp_size": (1, 1024),
    "pp_size": (1, 1024),
    "ep_size": (1, 1024),
    "context_length": (1, 1 << 31),
    "max_running_requests": (1, 1 << 31),
    "max_total_num_tokens": (1, 1 << 40),
    "max_req_input_len": (1, 1 << 31),
    "chunked_prefill_size": (-1, 1 << 31),  # -1: SGLang's "no chunking"
    "max_prefill_tokens": (1, 1 << 31),
    "page_size": (1, 1 << 20),
    "cuda_graph_max_bs": (0, 1 << 20),
    "port": (1, 65535),
}
# Keys read as text: a string (cut), else left out.
TEXT_KEYS = ("version", "model_path", "served_model_name", "tokenizer_path", "launch_command")


class InfoError(ValueError):
    """Why a body is not a /server_info sgltui can read (one line)."""


def decode(body: bytes) -> dict[str, Any]:
    """The /server_info in `body`, checked (InfoError) and bounded (`clean`)."""
    try:
        info = json.loads(body)
    except RecursionError:
        raise InfoError(
            f"/server_info is nested more than {MAX_DEPTH} deep (not SGLang?)"
        ) from None
    except ValueError:
        raise InfoError("/server_info is not JSON (not SGLang?)") from None
    if not isinstance(info, dict):
        raise InfoError("/server_info is not a JSON object (not SGLang?)")
    if _depth(info) > MAX_DEPTH:
        raise InfoError(f"/server_info is nested more than {MAX_DEPTH} deep (not SGLang?)")
    return clean(info)


def clean(info: dict[str, Any]) -> dict[str, Any]:
    """`info` with the keys sgltui reads of the type it expects (else left out), every string
    cut to MAX_TEXT and every number finite and within MAX_INT. `info` must be at most
    MAX_DEPTH deep (`decode` checks)."""
    out: dict[str, Any] = _bounded(info)
    for key, (low, high) in INT_KEYS.items():
        if out.get(key) is not None:  # (null is SGLang's own "not set")
            value = _whole(out[key])
            if value is None or not low <= value <= high:
                del out[key]
            else:
                out[key] = value
    for key in TEXT_KEYS:
        if out.get(key) is not None and not isinstance(out[key], str):
            del out[key]
    return out


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _bounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k)[:MAX_TEXT]: _bounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bounded(v) for v in value]
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if -MAX_INT <= value <= MAX_INT else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def _depth(value: Any) -> int:
    """How deep `value` nests (a scalar is 0), walked without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            todo.extend((v, depth + 1) for v in item)
    return deepest
