"""Turning HTTP request bodies into engine requests, and engine progress into response bodies,
for the native /generate API and the OpenAI completions/chat APIs as SGLang 0.5.23 serves them.
"""

from __future__ import annotations

import time
import uuid

from sgltui.sim.text import detokenize, prompt_text, tokenize


class BadRequest(Exception):
    """Answered with 400 and SGLang's error body."""


def _as_int_list(x) -> bool:
    return isinstance(x, list) and all(isinstance(i, int) for i in x)


def generate_prompts(body: dict, vocab: int) -> tuple[list[list[int]], bool]:
    """[(input ids)] and whether the request is a batch."""
    text, ids = body.get("text"), body.get("input_ids")
    if text is None and ids is None:
        raise BadRequest("Either text or input_ids should be provided.")
    if text is not None and ids is not None:
        raise BadRequest("Either text or input_ids should be provided, not both.")
    if text is not None:
        if isinstance(text, str):
            return [tokenize(text, vocab)], False
        if isinstance(text, list) and all(isinstance(t, str) for t in text) and text:
            return [tokenize(t, vocab) for t in text], True
        raise BadRequest("text must be a string or a list of strings.")
    if _as_int_list(ids) and ids:
        return [list(ids)], False
    if isinstance(ids, list) and ids and all(_as_int_list(i) and i for i in ids):
        return [list(i) for i in ids], True
    raise BadRequest("input_ids must be a non-empty list of ints or a list of such lists.")


def sampling_from_native(sp: dict | None) -> dict:
    sp = dict(sp or {})
    out = {
        "max_new_tokens": sp.get("max_new_tokens", 128),
        "ignore_eos": bool(sp.get("ignore_eos", False)),
    }
    _check_sampling(sp, "max_new_tokens")
    stop = sp.get("stop")
    out["stop"] = [stop] if isinstance(stop, str) else list(stop or [])
    out["stop_token_ids"] = list(sp.get("stop_token_ids") or [])
    return out


def _check_sampling(sp: dict, max_key: str) -> None:
    mx = sp.get(max_key)
    if mx is not None and (not isinstance(mx, int) or isinstance(mx, bool) or mx < 0):
        raise BadRequest(f"{max_key} must be a non-negative integer, got {mx!r}.")
    t = sp.get("temperature")
    if t is not None and (not isinstance(t, (int, float)) or t < 0):
        raise BadRequest(f"temperature must be a non-negative number, got {t!r}.")
    tp = sp.get("top_p")
    if tp is not None and (not isinstance(tp, (int, float)) or not 0 < tp <= 1):
        raise BadRequest(f"top_p must be in (0, 1], got {tp!r}.")


def sampling_from_openai(body: dict, chat: bool) -> dict:
    key = (
        "max_completion_tokens"
        if chat and body.get("max_completion_tokens") is not None
        else "max_tokens"
    )
    _check_sampling(body, key)
    mx = body.get(key)
    if mx is None:
        mx = 16 if not chat else None
    stop = body.get("stop")
    return {
        "max_new_tokens": mx,
        "ignore_eos": bool(body.get("ignore_eos", False)),
        "stop": [stop] if isinstance(stop, str) else list(stop or []),
        "stop_token_ids": list(body.get("stop_token_ids") or []),
    }


def completion_prompts(body: dict, vocab: int) -> list[list[int]]:
    prompt = body.get("prompt")
    if prompt is None:
        raise BadRequest("prompt is required.")
    if isinstance(prompt, str):
        return [tokenize(prompt, vocab)]
    if _as_int_list(prompt) and prompt:
        return [list(prompt)]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return [tokenize(p, vocab) for p in prompt]
    if isinstance(prompt, list) and prompt and all(_as_int_list(p) and p for p in prompt):
        return [list(p) for p in prompt]
    raise BadRequest("prompt must be a string, a list of strings, or token ids.")


def chat_prompt(body: dict, vocab: int) -> list[int]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("messages must be a non-empty list.")
    parts = []
    for m in msgs:
        if not isinstance(m, dict) or "role" not in m:
            raise BadRequest("each message needs a role and content.")
        content = m.get("content") or ""
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        parts.append(f"<|im_start|>{m['role']}\n{content}<|im_end|>")
    parts.append("<|im_start|>assistant\n")
    return tokenize("\n".join(parts), vocab)


def output_text(ids: list[int], finish: dict | None) -> str:
    """Text of the output; a matched stop string and what follows it are not returned."""
    text = detokenize(ids)
    if finish and finish.get("type") == "stop" and isinstance(finish.get("matched"), str):
        cut = text.find(finish["matched"])
        if cut >= 0:
            text = text[:cut]
    return text


def native_meta(st, finished: bool, e2e: float | None) -> dict:
    m = st.meta
    meta = {
        "id": st.rid,
        "finish_reason": st.finish if finished else None,
        "prompt_tokens": m.get("prompt_tokens", st.prompt_tokens),
        "completion_tokens": len(st.output_ids),
        "cached_tokens": m.get("cached_tokens", 0),
        "reasoning_tokens": 0,
        "weight_version": "default",
        "num_retractions": m.get("num_retractions", 0),
        "cached_tokens_details": m.get("cached_tokens_details"),
    }
    for k in (
        "spec_accept_rate",
        "spec_accept_length",
        "spec_num_correct_drafts",
        "spec_num_proposed_drafts",
        "spec_verify_ct",
    ):
        if k in m:
            meta[k] = m[k]
    if finished and e2e is not None:
        meta["e2e_latency"] = e2e
    return meta


def finish_reason_openai(finish: dict | None) -> tuple[str | None, object]:
    if not finish:
        return None, None
    kind = finish.get("type")
    if kind == "length":
        return "length", None
    if kind == "abort":
        return "abort", None
    return "stop", finish.get("matched")


def usage(prompt: int, completion: int, cached: int, cache_report: bool) -> dict:
    u = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": {"cached_tokens": cached} if cache_report else None,
        "reasoning_tokens": 0,
    }
    return u


def completion_id() -> str:
    """SGLang reuses the request id (a uuid4 hex) as the OpenAI response id."""
    return uuid.uuid4().hex


def now() -> int:
    return int(time.time())


def echo_text(ids: list[int]) -> str:
    return prompt_text(ids)
