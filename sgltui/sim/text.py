"""Token ids and word-like text for the simulator.

There is no real tokenizer: a prompt's "tokens" are its words and punctuation hashed into the
vocabulary, which is stable across processes (crc32, not Python's salted hash) so the prefix
cache sees the same ids for the same text. Output tokens are drawn from a small word list by a
per-request RNG seeded from --sim-seed and the prompt, so a given seed always answers the same.
"""

from __future__ import annotations

import random
import re
import zlib

_WORDS = (
    "the of and to in is that for it as with was on be by this are from at or an which have not "
    "model server memory token batch cache request decode prefill kernel graph layer head state "
    "throughput latency queue running speculative draft accept verify prefix host device pool "
    "capital city France Paris river bridge mountain valley ocean forest garden window light "
    "system process signal value number result answer question reason because however therefore "
    "first second third next last small large quick careful simple clear stable steady bright "
    "time place world people water energy market design method report review measure compare"
).split()
_PUNCT = (",", ".", "\n")

VOCAB_OFFSET = 1000  # output word ids start here (ids below are "special"/prompt ids)
EOS_TOKEN_ID = 2
_PIECE_RE = re.compile(r"\w+|[^\w\s]")


def tokenize(text: str, vocab: int) -> list[int]:
    """Stable ids for a prompt: one per word or punctuation mark."""
    top = max(vocab - 1, VOCAB_OFFSET + 1)
    return [3 + zlib.crc32(p.encode()) % (top - 3) for p in _PIECE_RE.findall(text)] or [3]


def token_text(token_id: int) -> str:
    """The text of one output token (a word with its leading space, or punctuation)."""
    idx = token_id - VOCAB_OFFSET
    if idx < 0:
        return ""
    if idx >= len(_WORDS):
        return _PUNCT[(idx - len(_WORDS)) % len(_PUNCT)]
    return " " + _WORDS[idx]


def detokenize(ids) -> str:
    return "".join(token_text(i) for i in ids)


def prompt_text(ids) -> str:
    """Something readable for echoed prompts given as ids."""
    return " ".join(_WORDS[i % len(_WORDS)] for i in ids)


class WordStream:
    """The answer one request produces, token by token, deterministically."""

    def __init__(self, seed: int, prompt_ids, mean_len: int):
        key = zlib.crc32(bytes(str(list(prompt_ids[:64])), "ascii")) ^ (
            seed * 2654435761 & 0xFFFFFFFF
        )
        self._rng = random.Random(key)
        # Where the model would emit EOS when not told to ignore it.
        self.natural_len = max(1, int(self._rng.lognormvariate(0, 0.6) * mean_len))
        self._since_punct = 0

    def next_id(self) -> int:
        self._since_punct += 1
        if self._since_punct > 4 and self._rng.random() < 0.15:
            self._since_punct = 0
            return (
                VOCAB_OFFSET
                + len(_WORDS)
                + (0 if self._rng.random() < 0.6 else (1 if self._rng.random() < 0.8 else 2))
            )
        return VOCAB_OFFSET + self._rng.randrange(len(_WORDS))

    def random(self) -> float:
        return self._rng.random()
