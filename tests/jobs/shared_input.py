"""Batch inputs whose prompts share prefixes (documents asked several questions), for the
warm-first tests (jobs/warm_first.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

SYSTEM = "You answer questions about the document below, briefly and exactly. " * 3


def doc(c: int) -> str:
    # each document its own words from its first characters on (none starts like another)
    rnd = random.Random(1000 + c)
    return " ".join(f"w{rnd.randrange(10**6)}" for _ in range(40 + c % 7))


def write_shared(
    path: Path, contexts: int, per: int, seed: int = 7, max_tokens: int = 4, system: str = ""
) -> list[int]:
    """contexts x per requests in random order, each a document then its own question, every
    other one a chat; returns each line's document."""
    rnd = random.Random(seed)
    order = [i % contexts for i in range(contexts * per)]
    rnd.shuffle(order)
    with open(path, "w") as fh:
        for i, c in enumerate(order):
            text = f"{system}{doc(c)}\nQuestion {rnd.randrange(10**9)}: what about item {i}?"
            if i % 2:
                url, body = (
                    "/v1/chat/completions",
                    {"messages": [{"role": "user", "content": text}]},
                )
            else:
                url, body = "/v1/completions", {"prompt": text}
            body |= {"model": "m", "max_tokens": max_tokens}
            fh.write(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": url, "body": body}))
            fh.write("\n")
    return order
