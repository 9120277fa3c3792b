"""How much of a job's prompts a prefix cache can reuse, and what hit rate a cache of a given
size gets on them (pure; for core/advice.py's hicache rule).

`measure` reads prompts (a sample of the job's input): each prompt's reusable prefix is the
longest prefix it shares with another prompt of the sample (a shared system prompt, a few-shot
header, a document asked several questions); the working set is the tokens of the distinct
shared prefixes (a trie's size: sorted prompts, each adds its shared prefix less what it shares
with its sorted neighbour). The rest of each prompt, and its answer, is used once.

`hit_rate` is the share of requests whose shared prefix is still cached when they arrive, for
an LRU cache of `capacity` tokens and requests in random order over `contexts` equal prefixes
(Che's approximation: the cache holds what the last N requests touched, N solved from the
capacity; each of those requests also left its used-once tail in it). SGLang's radix cache
evicts least recently used leaves first; with HiCache the host pool keeps evicted prefixes, so
the capacity is about (1 + ratio) x the device pool (serving-model reference 3.3).
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

MIN_SHARED_CHARS = 64  # a shorter common start (a chat template's first words) is not reuse


@dataclass(frozen=True)
class PrefixReuse:
    prompts: int  # prompts sampled
    shared_tokens: float  # mean reusable prefix per prompt (tokens)
    working_set_tokens: float  # the distinct shared prefixes' tokens
    sharing: float  # share of the sampled prompts that share a prefix with another
    prompt_tokens: float = 0.0  # the mean prompt, in the same units

    def scaled(self, prompt_tokens: float | None) -> PrefixReuse:
        """The same reuse in the units of `prompt_tokens` (the server's count of the mean
        prompt, where answers said it): the sample counts characters / 4."""
        if not prompt_tokens or self.prompt_tokens <= 0:
            return self
        f = prompt_tokens / self.prompt_tokens
        return dataclasses.replace(
            self,
            shared_tokens=self.shared_tokens * f,
            working_set_tokens=self.working_set_tokens * f,
            prompt_tokens=prompt_tokens,
        )

    @property
    def contexts(self) -> float:
        """Distinct shared prefixes, as if all were of the mean length."""
        per = self.shared_tokens / self.sharing if self.sharing > 0 else 0.0
        return self.working_set_tokens / per if per > 0 else 0.0

    @property
    def prefix_tokens(self) -> float:
        """The mean length of a shared prefix, over the prompts that share one."""
        return self.shared_tokens / self.sharing if self.sharing > 0 else 0.0

    def as_json(self) -> dict[str, float]:
        return {
            "prompts": self.prompts,
            "shared_tokens": round(self.shared_tokens, 1),
            "working_set_tokens": round(self.working_set_tokens),
            "sharing": round(self.sharing, 3),
            "prompt_tokens": round(self.prompt_tokens, 1),
        }


def _shared(order: list[str]) -> tuple[list[int], list[int]]:
    """For sorted prompts: the common prefix with each next one, and each prompt's reusable
    prefix (the longest it shares with any other: a sorted neighbour), 0 under MIN_SHARED_CHARS."""
    n = len(order)
    lcp = [len(os.path.commonprefix([order[i], order[i + 1]])) for i in range(n - 1)]
    shared = [max(lcp[i - 1] if i > 0 else 0, lcp[i] if i < n - 1 else 0) for i in range(n)]
    return lcp, [s if s >= MIN_SHARED_CHARS else 0 for s in shared]


def prefix_key(prompts: list[str]) -> tuple[int, int] | None:
    """(K, distinct): how many first characters of a prompt tell its shared prefix (a document
    asked several questions) from the others', and how many distinct such keys `prompts` hold;
    None where fewer than two prefixes are shared (nothing to tell apart).

    K is near the shared length, not the shortest: sorted, neighbours asking the same document
    share all of it, neighbours across documents only what every prompt starts with (a common
    system prompt) and a few chance characters. So the start common to all sharing prompts is
    passed over, the neighbours sharing at least half the median length above it are taken as
    the same document's, and K is the least they share. Too coarse (documents with a common
    header longer than half a document): those documents share a key, nothing is lost but the
    gain; too fine (a document under half the median, so its key reaches into the question):
    each of its requests is a key of its own (jobs/warm_first.py caps what it sends first)."""
    if len(prompts) < 2:
        return None
    order = sorted(prompts)
    lcp, shared = _shared(order)
    sharing = [p for p, s in zip(order, shared, strict=True) if s]
    if len(sharing) < 2:
        return None
    common = len(os.path.commonprefix([sharing[0], sharing[-1]]))  # sorted: all of theirs
    # chance overlaps past it (a few characters) are not a document's
    above = sorted(x for x in lcp if x >= common + MIN_SHARED_CHARS)
    if not above:
        return None  # one shared start only (a system prompt): nothing to tell apart
    half = common + (above[len(above) // 2] - common) / 2
    k = min(x for x in above if x >= half)
    distinct = len({p[:k] for p, s in zip(order, shared, strict=True) if s >= k})
    return (k, distinct) if distinct >= 2 else None


def measure(prompts: list[str], chars_per_token: float = 4.0) -> PrefixReuse | None:
    """The reuse in `prompts` (None for fewer than two)."""
    if len(prompts) < 2:
        return None
    order = sorted(prompts)
    n = len(order)
    lcp, shared = _shared(order)
    # distinct shared characters: each prompt's shared prefix less what its predecessor's covers
    distinct = 0
    for i, s in enumerate(shared):
        prev = min(lcp[i - 1], shared[i - 1]) if i > 0 else 0
        distinct += max(0, s - min(prev, s))
    return PrefixReuse(
        prompts=n,
        shared_tokens=sum(shared) / n / chars_per_token,
        working_set_tokens=distinct / chars_per_token,
        sharing=sum(1 for s in shared if s) / n,
        prompt_tokens=sum(len(p) for p in prompts) / n / chars_per_token,
    )


def hit_rate(reuse: PrefixReuse, capacity_tokens: float, tail_tokens: float) -> float:
    """Share of the sharing requests whose prefix an LRU cache of `capacity_tokens` still holds,
    each request also leaving `tail_tokens` used once (its own prompt rest and answer)."""
    k, length = reuse.contexts, reuse.prefix_tokens
    if k <= 0 or length <= 0 or capacity_tokens <= 0:
        return 0.0
    tail = max(0.0, tail_tokens)

    def held(n: float) -> float:  # what the last n requests leave in the cache
        return n * tail + k * length * (1.0 - math.exp(-n / k))

    if tail == 0.0 and held(1e12) <= capacity_tokens:
        return 1.0
    lo, hi = 0.0, 1.0
    while held(hi) < capacity_tokens and hi < 1e12:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if held(mid) < capacity_tokens else (lo, mid)
    return 1.0 - math.exp(-lo / k)


WARM_SHARE = 0.9  # a cache is warm once the job has touched this share of its contexts


def warm_requests(reuse: PrefixReuse, capacity_tokens: float, tail_tokens: float) -> int:
    """Requests after which a cache of `capacity_tokens`, empty at first (a new server), holds
    what it will hold for the rest of the job: the last N requests' prefixes and tails, N as in
    `hit_rate`, or, for a cache that holds them all, until WARM_SHARE of the contexts were
    asked once. A rate measured before is the cold cache's, not the job's."""
    k, length = reuse.contexts, reuse.prefix_tokens
    if k <= 0 or length <= 0 or capacity_tokens <= 0:
        return 0
    touch_all = k * math.log(1.0 / (1.0 - WARM_SHARE))
    tail = max(0.0, tail_tokens)
    full = k * length + touch_all * tail  # what the job leaves by the time it touched them all
    if full <= capacity_tokens:
        return math.ceil(touch_all)
    h = hit_rate(reuse, capacity_tokens, tail)
    n = -k * math.log(max(1e-9, 1.0 - h))  # the requests the cache remembers
    return math.ceil(min(touch_all, n))
