"""Workloads: which prompt and output length request number i gets.

Every workload is deterministic for a seed, so every profile compared sees the same prompts in
the same order. Prompts are made from a small fixed vocabulary of common
short words (about one token each in typical tokenizers); the exact input token counts come
from the server's usage, not from here.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

_WORDS = (
    "the of and to in is it you that he was for on are with as his they be at one have this from "
    "or had by hot word but what some we can out other were all there when up use your how said "
    "an each she which do their time if will way about many then them write would like so these "
    "her long make thing see him two has look more day could go come did number sound no most "
    "people my over know water than call first who may down side been now find any new work part "
    "take get place made live where after back little only round man year came show every good me "
    "give our under name very through just form sentence great think say help low line differ turn "
    "cause much mean before move right boy old too same tell does set three want air well also play "
    "small end put home read hand port large spell add even land here must big high such follow act"
).split()


class WorkloadError(Exception):
    """A workload that cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class Item:
    prompt: str | list  # text, or chat messages from a file workload
    output_len: int


class Workload:
    """Base: `item(i)` for request i; `digest` identifies the prompt set for the result file."""

    name = "base"

    def item(self, i: int) -> Item:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def digest(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choices(_WORDS, k=n_words))


class RandomWorkload(Workload):
    """Fixed-length random-word prompts; a unique leading number per request defeats prefix reuse.

    A pool of bodies is built once so that making a request costs almost no client CPU (the
    client's CPU per token is one of the budgets).
    """

    name = "random"

    def __init__(self, input_len: int, output_len: int, seed: int = 42, pool: int = 64) -> None:
        if input_len < 1 or output_len < 1:
            raise WorkloadError("--input-len and --output-len must be at least 1")
        rng = random.Random(seed)
        self.input_len, self.output_len, self.seed = input_len, output_len, seed
        self.bodies = [_text(rng, max(1, input_len - 1)) for _ in range(pool)]

    def item(self, i: int) -> Item:
        return Item(f"{i} {self.bodies[i % len(self.bodies)]}", self.output_len)

    @property
    def digest(self) -> str:
        return hashlib.sha256(
            f"random:{self.input_len}:{self.output_len}:{self.seed}".encode()
        ).hexdigest()[:12]


class SharedPrefixWorkload(Workload):
    """G groups whose prompts share a long system prefix (3/4 of the input), like SGLang's
    generated-shared-prefix: the workload where a prefix cache (and HiCache) can matter."""

    name = "shared-prefix"

    def __init__(self, input_len: int, output_len: int, seed: int = 42, groups: int = 8) -> None:
        if input_len < 4 or output_len < 1:
            raise WorkloadError("shared-prefix needs --input-len >= 4 and --output-len >= 1")
        rng = random.Random(seed)
        prefix_len = input_len * 3 // 4
        self.input_len, self.output_len, self.seed, self.groups = (
            input_len,
            output_len,
            seed,
            groups,
        )
        self.prefixes = [_text(rng, prefix_len) for _ in range(groups)]
        self.suffix_len = max(1, input_len - prefix_len - 1)
        self.suffixes = [_text(rng, self.suffix_len) for _ in range(64)]

    def item(self, i: int) -> Item:
        prefix = self.prefixes[i % self.groups]
        return Item(f"{prefix} {i} {self.suffixes[i % len(self.suffixes)]}", self.output_len)

    @property
    def digest(self) -> str:
        key = f"shared-prefix:{self.input_len}:{self.output_len}:{self.seed}:{self.groups}"
        return hashlib.sha256(key.encode()).hexdigest()[:12]


class FileWorkload(Workload):
    """Prompts from a JSONL file, one object a line: {"prompt": "..."} or {"messages": [...]},
    optional "output_len" (or "max_tokens"); cycled when more requests than lines are asked."""

    name = "file"

    def __init__(self, path: Path, output_len: int) -> None:
        self.path = Path(path)
        self.items: list[Item] = []
        sha = hashlib.sha256()
        try:
            fh = self.path.open("rb")
        except OSError as exc:
            raise WorkloadError(
                f"cannot read workload file {self.path}: {exc.strerror}; give a readable .jsonl file"
            ) from None
        with fh:
            for lineno, raw in enumerate(fh, 1):
                sha.update(raw)
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except ValueError:
                    raise WorkloadError(
                        f"{self.path}:{lineno}: not JSON; each line must be an object like "
                        '{"prompt": "...", "output_len": 256}'
                    ) from None
                prompt = (
                    obj.get("messages") or obj.get("prompt") or obj.get("text")
                    if isinstance(obj, dict)
                    else None
                )
                if not prompt:
                    raise WorkloadError(
                        f'{self.path}:{lineno}: no "prompt" or "messages"; add one to every line'
                    )
                out = obj.get("output_len") or obj.get("max_tokens") or output_len
                try:
                    out = int(out)
                except (TypeError, ValueError):
                    raise WorkloadError(
                        f"{self.path}:{lineno}: output_len must be an integer"
                    ) from None
                self.items.append(Item(prompt, out))
        if not self.items:
            raise WorkloadError(
                f'{self.path}: no prompts in the file; add JSONL lines with "prompt"'
            )
        self._digest = sha.hexdigest()[:12]

    def item(self, i: int) -> Item:
        return self.items[i % len(self.items)]

    @property
    def digest(self) -> str:
        return self._digest


def make_workload(kind: str, input_len: int, output_len: int, seed: int = 42) -> Workload:
    """`kind` is "random", "shared-prefix" or a path to a .jsonl file."""
    if kind == "random":
        return RandomWorkload(input_len, output_len, seed)
    if kind == "shared-prefix":
        return SharedPrefixWorkload(input_len, output_len, seed)
    path = Path(kind).expanduser()
    if path.suffix != ".jsonl" and not path.exists():
        raise WorkloadError(f"unknown workload {kind!r}; use random, shared-prefix or a FILE.jsonl")
    return FileWorkload(path, output_len)
