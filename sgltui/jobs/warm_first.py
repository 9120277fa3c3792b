"""Warm-first order: where a job's prompts share prefixes, a server whose prefix cache starts
empty (the job's start, a new server after a swap) is asked once per shared prefix first.

Sent in file order, a job of documents asked many questions in random order warms a new
server's cache only as the coupon collector goes (contexts x ln 10 requests until 90% of them
were asked once); sent one per prefix first, after about as many requests as there are prefixes.
So at each cold start the runner looks ahead in the input (at most LOOKAHEAD items or
LOOKAHEAD_BYTES of request bodies, held in memory), sends first the first request of each
shared prefix it finds there (at most 2x the distinct prefixes measured in the input's first
lines: a key that came out too fine, one per request, costs no more than that), then the
held-back items in their file order, then the rest of the file. Nothing is sent twice or
skipped: it is the same items in another order, and a resumed run (kill -9) skips what the
output holds by custom_id as before, re-reading the held-back ones from the file.

The key is a prompt's first K characters, K from core/prefix_reuse.py prefix_key (the measured
shared length, past a common system prompt); where the first lines share nothing, nothing is
reordered (`plan` is None).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from sgltui.core import job_input, prefix_reuse
from sgltui.jobs.batchfile import Item

LOOKAHEAD = 8192  # items read ahead at a cold start (held in memory until sent)
LOOKAHEAD_BYTES = 256 << 20  # ... or this much of their bodies, whichever comes first
PASS_FACTOR = 2  # a pass sends at most this x the distinct prefixes measured


@dataclass(frozen=True)
class Plan:
    key_chars: int  # K: a prompt's first K characters tell its shared prefix
    distinct: int  # distinct keys in the input's first lines
    cap: int  # the most requests a pass sends first


def plan(
    path: Path, lines: int = job_input.SAMPLE_LINES, lookahead: int = LOOKAHEAD
) -> Plan | None:
    """Warm-first for the job at `path`, from its first `lines` lines; None where they share no
    prefixes (the job is sent in file order, as before)."""
    bodies = job_input.first_bodies(path, lines)
    if bodies is None:
        return None
    found = prefix_reuse.prefix_key([job_input.prompt_text(body) for body in bodies])
    if found is None:
        return None
    k, distinct = found
    return Plan(key_chars=k, distinct=distinct, cap=max(1, min(lookahead, PASS_FACTOR * distinct)))


def key(item: Item, k: int) -> str:
    try:
        body = orjson.loads(item.body)
    except orjson.JSONDecodeError:
        return ""
    return job_input.prompt_text(body)[:k] if isinstance(body, dict) else ""


class Order:
    """The runner's items, warm-first after each `cold()`; an iterator like batchfile.items."""

    def __init__(
        self,
        items: Iterator[Item],
        p: Plan,
        lookahead: int = LOOKAHEAD,
        lookahead_bytes: int = LOOKAHEAD_BYTES,
    ) -> None:
        self.plan = p
        self._src = items
        self._lookahead = lookahead
        self._lookahead_bytes = lookahead_bytes
        self._first: deque[Item] = deque()  # the pass's items not yet given out
        self._held: deque[Item] = deque()  # read ahead, in file order
        self._pos: dict[str, int] = {}  # their places in it (an unfinished pass goes back)
        self.launch: str | None = None  # the server the last pass was for (as the agent said)
        self.passes = 0
        self.primed = 0  # the last pass's requests
        self.unanswered: set[str] = set()  # its custom_ids not yet written (answered or failed)

    def __iter__(self) -> Iterator[Item]:
        return self

    def __next__(self) -> Item:
        if self._first:
            return self._first.popleft()
        if self._held:
            return self._held.popleft()
        return next(self._src)

    def cold(self, launch: str | None = None, most: int | None = None) -> int:
        """A server with an empty cache: the next items are one per shared prefix found in the
        look-ahead, at most `most` (those of an unfinished pass go back to their file places
        first)."""
        self.trim(0)
        held_bytes = sum(len(i.body) for i in self._held)
        for item in self._src:
            self._held.append(item)
            held_bytes += len(item.body)
            if len(self._held) >= self._lookahead or held_bytes >= self._lookahead_bytes:
                break
        self._pos = {i.custom_id: n for n, i in enumerate(self._held)}
        seen: set[str] = set()
        first: list[Item] = []
        rest: deque[Item] = deque()
        cap = self._most(most)
        for item in self._held:
            kk = key(item, self.plan.key_chars) if len(first) < cap else None
            if kk is not None and kk not in seen:
                seen.add(kk)
                first.append(item)
            else:
                rest.append(item)
        self._first, self._held = deque(first), rest
        self.launch = launch
        self.passes += 1
        self.primed = len(first)
        self.unanswered = {i.custom_id for i in first}
        return self.primed

    def _most(self, most: int | None) -> int:
        """What a pass may send first. `most` is the server's cache warm-up where a trial knows
        it (the requests its cache remembers): under the prefixes measured, the cache holds only
        part of them and gets no pass. Priming more than it holds evicts the first primed, and
        the next requests in file order, which ask the first-seen prefixes most, then miss more
        than in the steady state: bench_advise's serving profile (a cache of about half its
        200 contexts) measured 1,969 tok/s after a pass, 2,552 without."""
        if most is None:
            return self.plan.cap
        return 0 if most < self.plan.distinct else min(self.plan.cap, most)

    def trim(self, most: int | None) -> None:
        """The pass sends at most what `_most` allows in all (those already given out count):
        the rest go back to their file places among the held-back items."""
        allowed = self._most(most)
        keep = max(0, allowed - (self.primed - len(self._first)))
        if len(self._first) > keep:
            back = list(self._first)[keep:]
            self._first = deque(list(self._first)[:keep])
            self._held = deque(sorted((*back, *self._held), key=lambda i: self._pos[i.custom_id]))
            self.primed -= len(back)
            self.unanswered.difference_update(i.custom_id for i in back)
        if allowed == 0:
            # no pass for this server: the few already given out are ordinary sends, and the
            # trial keeps advise's warm-up (jobs/choose.py warm_first)
            self.primed = 0
            self.unanswered.clear()

    def written(self, custom_id: str) -> None:
        self.unanswered.discard(custom_id)

    def report(self) -> dict:
        """For the progress line: the chooser takes the end of a pass as the cache's warm-up."""
        return {
            "launch": self.launch,
            "passes": self.passes,
            "primed": self.primed,
            "left": len(self.unanswered),
            "key_chars": self.plan.key_chars,
            "distinct": self.plan.distinct,
        }
