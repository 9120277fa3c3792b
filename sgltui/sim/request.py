"""A request inside the simulated scheduler (sim/scheduler.py): its state, the tokens it
generates (stop tokens, stop strings, length), the draft tokens a speculative step accepts, and
what goes back to the main process for it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sgltui.sim.memory import SpecConfig
from sgltui.sim.text import EOS_TOKEN_ID, WordStream, token_text


@dataclass
class Req:
    rid: str
    input_ids: list[int]
    max_new: int
    ignore_eos: bool
    stop: list[str]
    stop_ids: set[int]
    words: WordStream
    keys: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    dev_hit: int = 0  # prompt tokens found in the device cache
    host_hit: int = 0  # prompt tokens loaded back from the host tier
    locked: list[int] = field(default_factory=list)
    prefilled: int = 0  # tokens of (prompt + kept output) already in the KV pool
    owned: int = 0  # KV tokens this request holds outside the shared cache
    verify_ct: int = 0
    accepted: int = 0  # accepted draft tokens
    retractions: int = 0
    tail: str = ""  # recent output text, for stop strings
    finish: dict | None = None

    @property
    def seq_len(self) -> int:
        return len(self.input_ids) + len(self.output_ids)

    @property
    def remaining(self) -> int:
        return max(0, self.max_new - len(self.output_ids))


def generate(req: Req, n: int) -> list[int]:
    """Up to `n` new tokens of `req`'s answer, stopping at its end, a stop token or string, or
    its length limit (req.finish says which)."""
    new: list[int] = []
    for _ in range(n):
        if not req.ignore_eos and len(req.output_ids) >= req.words.natural_len:
            req.finish = {"type": "stop", "matched": EOS_TOKEN_ID}
            break
        tok = req.words.next_id()
        req.output_ids.append(tok)
        new.append(tok)
        if tok in req.stop_ids:
            req.finish = {"type": "stop", "matched": tok}
            break
        if req.stop:
            req.tail = (req.tail + token_text(tok))[-256:]
            hit = next((s for s in req.stop if s in req.tail), None)
            if hit is not None:
                req.finish = {"type": "stop", "matched": hit}
                break
        if len(req.output_ids) >= req.max_new:
            req.finish = {"type": "length", "length": req.max_new}
            break
    return new


def accept_length(
    req: Req,
    spec: SpecConfig | None,
    chain: tuple[float, ...],
    bad_draft: bool,
    batch: int = 1,
    decay: float = 0.0,
) -> int:
    """1 bonus token + accepted drafts along the chain (per-position cumulative acceptance).
    `decay` (--sim-accept-decay): the chain falls by that share per doubling of the running
    `batch` (at least a fifth of it is kept)."""
    if bad_draft:
        return 1  # a draft refilled wrongly after a resume: nothing it proposes is accepted
    assert spec is not None, "only speculative requests get an accept length"
    topk_boost = 1.0 + 0.05 * (spec.eagle_topk - 1)
    if decay > 0 and batch > 1:
        topk_boost *= max(0.2, 1.0 - decay * math.log2(batch))
    n = 1
    prev = 1.0
    for j in range(min(spec.num_steps, spec.num_draft_tokens - 1, len(chain))):
        p = min(1.0, chain[j] * topk_boost)
        if req.words.random() >= p / prev:
            break
        prev = p
        n += 1
    return n


def output(req: Req, new: list[int], spec: SpecConfig | None) -> tuple:
    """What the main process gets for `req`: (rid, new tokens, finish, meta_info)."""
    meta = {
        "prompt_tokens": len(req.input_ids),
        "completion_tokens": len(req.output_ids),
        "cached_tokens": req.dev_hit + req.host_hit,
        "cached_tokens_details": {"device": req.dev_hit, "host": req.host_hit, "storage": 0},
        "num_retractions": req.retractions,
    }
    if spec:
        meta["spec_verify_ct"] = req.verify_ct
        meta["spec_num_correct_drafts"] = req.accepted
        meta["spec_num_proposed_drafts"] = req.verify_ct * spec.num_steps
        meta["spec_accept_length"] = (
            (req.accepted + req.verify_ct) / req.verify_ct if req.verify_ct else 1.0
        )
        meta["spec_accept_rate"] = req.accepted / max(1, req.verify_ct * spec.num_steps)
    return (req.rid, new, req.finish, meta)
