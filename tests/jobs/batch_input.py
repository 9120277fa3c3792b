"""Helpers for batch job tests: OpenAI batch input files."""

from __future__ import annotations

import json
from pathlib import Path


def write_input(path: Path, n: int, max_tokens: int = 16, bad: tuple[int, ...] = ()) -> list[str]:
    """n requests alternating chat and completions; indexes in `bad` get a body the server
    refuses with a 400 (a final failure). Returns the custom_ids in order."""
    ids = []
    with open(path, "w") as fh:
        for i in range(n):
            cid = f"req-{i:06d}"
            ids.append(cid)
            if i in bad:
                line = {
                    "custom_id": cid,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {"model": "m", "max_tokens": max_tokens},
                }
            elif i % 2:
                line = {
                    "custom_id": cid,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": "m",
                        "max_tokens": max_tokens,
                        "messages": [{"role": "user", "content": f"question {i}"}],
                    },
                }
            else:
                line = {
                    "custom_id": cid,
                    "method": "POST",
                    "url": "/v1/completions",
                    "body": {"model": "m", "prompt": f"prompt {i}", "max_tokens": max_tokens},
                }
            fh.write(json.dumps(line) + "\n")
    return ids


def read_output(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
