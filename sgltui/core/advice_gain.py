"""What a proposal is expected to buy, from one request's GPU time split into prefill and decode
(pure; core/advice.py orders its proposals by it).

Time is counted in small-batch decode steps of the serving model (the serving-model reference,
section 4): a prompt token the cache does not hold costs 1/PREFILL_TOKENS_PER_STEP of a step
(prefill is compute-bound, a small-batch step bandwidth-bound: their ratio is the crossover
batch, 150-270 on the GPUs it lists); a request's answer costs output / accept length steps,
each MTP step 1 + steps x DRAFT_STEP_COST of a plain one, shared with the other running
requests, each of which adds its own KV and state reads to the step. Prefill and decode do not
overlap (speculative decoding turns mixed chunks off), so a request's time is their sum, and
the job's throughput goes as its inverse.

- raising max-running-requests shortens the decode part (DECODE_EXPONENT: acceptance falls and
  the step grows with the batch) and leaves prefill as it is;
- HiCache shortens the prefill part only where the job's prompts share prefixes that the device
  pool cannot keep (core/prefix_reuse.py): SGLang sizes max running before HiCache exists, so
  concurrency is unchanged (reference 3.3); host hits load back over PCIe, overlapped with the
  rest of the prefill, at a cost left out here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sgltui.core import prefix_reuse
from sgltui.core.situation import Situation
from sgltui.core.units import GIB

PREFILL_TOKENS_PER_STEP = 200.0
DRAFT_STEP_COST = 0.06  # an MTP head's step over a 27B target step (reference 2)
DEFAULT_ACCEPT = 3.2  # MTP accept length where none was measured (reference 2: 3.0-3.4)
DECODE_EXPONENT = 0.7  # decode speed-up of n/m running requests: (n/m) ** this


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class RequestTime:
    """One request's GPU time, in small-batch decode steps."""

    prefill: float
    decode: float

    @property
    def total(self) -> float:
        return self.prefill + self.decode


def accept_length(s: Situation) -> float:
    if not s.server.get("speculative-algorithm"):
        return 1.0
    live = _num((s.engine or {}).get("accept_length"))
    return live if live and live > 1.0 else DEFAULT_ACCEPT


def decode_steps(s: Situation, running: int) -> float:
    """One request's share of the decode steps at `running` requests at once."""
    out = s.output_tokens or 0.0
    if out <= 0 or running <= 0:
        return 0.0
    steps = float(s.server.get("speculative-num-steps") or 3)
    cost = 1.0 + (steps * DRAFT_STEP_COST if s.server.get("speculative-algorithm") else 0.0)
    card = s.card or {}
    weights = (_num(card.get("weights_gb")) or 0.0) * GIB
    per_req = 0.0
    kv_gb, kv_tokens = _num(card.get("kv_pool_gb")), _num(card.get("kv_pool_tokens"))
    if kv_gb and kv_tokens:
        per_req += ((s.prompt_tokens or 0.0) + out / 2) * kv_gb * GIB / kv_tokens
    state_gb, slots = _num(card.get("mamba_state_gb")), _num(card.get("mamba_state_slots"))
    if state_gb and slots:
        per_req += 2 * state_gb * GIB / slots  # the GDN state read and written each step
    grow = 1.0 + running * per_req / weights if weights > 0 else 1.0
    return out / accept_length(s) * cost * grow / running


def reuse(s: Situation) -> prefix_reuse.PrefixReuse | None:
    """The job's prefix reuse in the server's tokens (the sample counted characters)."""
    return s.prefix.scaled(s.prompt_tokens) if s.prefix is not None else None


def device_cache_tokens(s: Situation, running: int) -> float:
    """The device pool's tokens left for cached prefixes while `running` requests hold theirs."""
    kv = _num((s.card or {}).get("kv_pool_tokens")) or 0.0
    per = (s.prompt_tokens or 0.0) + (s.output_tokens or 0.0)
    return max(0.0, kv - running * per)


def uncached_prompt(s: Situation, cache_tokens: float, live: bool = True) -> float:
    """A request's prompt tokens the cache does not hold, for a cache of `cache_tokens`: from
    the live hit rate where the serving profile runs the job (live=True), else estimated."""
    prompt = s.prompt_tokens or 0.0
    e = s.engine or {}
    hit = _num(e.get("cache_hit_rate"))
    if live and hit is not None and (_num(e.get("num_running_reqs")) or 0) > 0:
        return prompt * (1.0 - min(1.0, max(0.0, hit)))
    r = reuse(s)
    if r is None or r.shared_tokens <= 0:
        return prompt
    tail = max(0.0, prompt + (s.output_tokens or 0.0) - r.shared_tokens)
    h = prefix_reuse.hit_rate(r, cache_tokens, tail)
    return max(0.0, prompt - h * r.shared_tokens)


def request_time(s: Situation, running: int, cache_tokens: float, live: bool = True) -> RequestTime:
    return RequestTime(
        prefill=uncached_prompt(s, cache_tokens, live) / PREFILL_TOKENS_PER_STEP,
        decode=decode_steps(s, running),
    )


def raise_gain(s: Situation, mrr: int, new: int, want: int | None) -> float:
    """The raise from `mrr` to `new` running (the job running `want`): decode shortened,
    prefill as it is (a little more of it: the running requests hold more of the pool)."""
    now = request_time(s, mrr, device_cache_tokens(s, mrr))
    speedup = float((min(want or new, new) / min(want or new, mrr)) ** DECODE_EXPONENT)
    if now.total <= 0:
        return speedup
    lost = uncached_prompt(s, device_cache_tokens(s, new), live=False) - uncached_prompt(
        s, device_cache_tokens(s, mrr), live=False
    )
    prefill = now.prefill + max(0.0, lost) / PREFILL_TOKENS_PER_STEP
    return float(now.total / (prefill + now.decode / speedup))


def hicache_gain(s: Situation, mrr: int, host_tokens: float) -> tuple[float, float, float]:
    """(gain, prompt tokens uncached now, with a host pool of `host_tokens`)."""
    device = device_cache_tokens(s, mrr)
    now = request_time(s, mrr, device)
    after = request_time(s, mrr, device + host_tokens, live=False)
    before = now.prefill * PREFILL_TOKENS_PER_STEP
    later = min(before, after.prefill * PREFILL_TOKENS_PER_STEP)
    total_after = later / PREFILL_TOKENS_PER_STEP + now.decode
    gain = now.total / total_after if total_after > 0 else 1.0
    return gain, before, later


def warmup(s: Situation, delta: dict[str, Any] | None = None) -> int:
    """Requests a new server of the serving profile (with `delta`) runs before its prefix
    cache holds what it will hold for this job (core/prefix_reuse.py warm_requests): a trial
    measures it only then. 0 where the job's prompts share nothing."""
    r = reuse(s)
    if r is None or r.shared_tokens <= 0:
        return 0
    delta = delta or {}
    card = s.card or {}
    mrr = delta.get("max-running-requests")
    if not isinstance(mrr, int) or isinstance(mrr, bool):
        mrr = int(_num(card.get("max_running_requests")) or 1)
    capacity = device_cache_tokens(s, mrr)
    ratio = _num(delta.get("hicache-ratio"))
    if delta.get("enable-hierarchical-cache") and ratio:
        capacity += ratio * (_num(card.get("kv_pool_tokens")) or 0.0)
    tail = max(0.0, (s.prompt_tokens or 0.0) + (s.output_tokens or 0.0) - r.shared_tokens)
    return prefix_reuse.warm_requests(r, capacity, tail)
