"""A first look at a batch job's input before it runs (for `sgltui advise` and `job run --choose
auto`): the mean prompt length (characters / CHARS_PER_TOKEN), the mean max output tokens, and
how much the prompts share prefixes (core/prefix_reuse.py), from the first SAMPLE_LINES lines."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sgltui.core import prefix_reuse
from sgltui.core.prefix_reuse import PrefixReuse

SAMPLE_LINES = 2000  # the input's first lines (the rest is the agent's to read)
CHARS_PER_TOKEN = 4.0  # a prompt's length before any answer says its tokens


@dataclass(frozen=True)
class InputSample:
    prompt_tokens: float | None
    output_tokens: float | None
    prefix: PrefixReuse | None


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt as the server gets it, in order (a chat's messages one after another), so two
    requests share a prefix here exactly as far as they share one there."""
    text = body.get("prompt")
    if isinstance(text, str):
        return text
    if text is not None:
        return json.dumps(text)
    messages = body.get("messages")
    if isinstance(messages, list):
        parts = []
        for m in messages:
            c = m.get("content") if isinstance(m, dict) else m
            parts.append(c if isinstance(c, str) else json.dumps(c))
        return "\n".join(parts)
    return ""


def first_bodies(path: Path, lines: int = SAMPLE_LINES) -> list[dict[str, Any]] | None:
    """The request bodies of the input's first `lines` lines (lines that are not a batch line
    with a body are passed over); None where the file cannot be read."""
    bodies: list[dict[str, Any]] = []
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh):
                if i >= lines:
                    break
                try:
                    body = json.loads(line).get("body")
                except (ValueError, AttributeError):
                    continue
                if isinstance(body, dict):
                    bodies.append(body)
    except OSError:
        return None
    return bodies


def sample(path: Path, lines: int = SAMPLE_LINES) -> InputSample:
    bodies = first_bodies(path, lines)
    if bodies is None:
        return InputSample(None, None, None)
    prompts = [prompt_text(body) for body in bodies]
    outputs: list[float] = []
    for body in bodies:
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        if isinstance(limit, int) and limit > 0:
            outputs.append(float(limit))
    mean_prompt = sum(len(p) for p in prompts) / len(prompts) / CHARS_PER_TOKEN if prompts else None
    return InputSample(
        prompt_tokens=mean_prompt,
        output_tokens=sum(outputs) / len(outputs) if outputs else None,
        prefix=prefix_reuse.measure(prompts, CHARS_PER_TOKEN),
    )


_CACHE: dict[tuple[str, int, int], InputSample] = {}


def cached_sample(path: str) -> InputSample:
    """`sample` of `path`, read again only when the file changes (the TUI asks every few
    seconds; a job's input is read once)."""
    try:
        st = os.stat(path)
    except OSError:
        return InputSample(None, None, None)
    key = (path, st.st_size, st.st_mtime_ns)
    if key not in _CACHE:
        if len(_CACHE) > 16:
            _CACHE.clear()
        _CACHE[key] = sample(Path(path))
    return _CACHE[key]
