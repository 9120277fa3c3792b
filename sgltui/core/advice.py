"""Proposals: the profiles nobody wrote, as small named deltas of the serving one.

Pure computation over what is already measured: the serving profile's capacity card (what bounds
its concurrency: core/capacity.py `bound`), its live readings (accept length by concurrency,
prefill and decode throughput), the host (RAM free after the standbys' pins, the GPU) and the
job's mean prompt and output lengths. Each rule below gives at most one candidate, with the
sentence of why, the figure it rests on and what it costs in host RAM and GPU memory. Every
candidate is checked against the flag catalog of the SGLang that will run it and the cross-flag
checks (core/validate.py) before it is shown; one that fails is listed as refused, with the
check's line. Nothing is written here: `accepted_profile` builds the profile (it `extends` the
serving one) for whoever writes it.

The rules (docs/jobs.md, "Proposals", says them for users):
- hicache off, host RAM free, and either KV- or mamba-bound or the job's prompts sharing
  prefixes the device pool cannot keep (core/prefix_reuse.py) -> hicache, its ratio sized from
  the free RAM (at most half of what SGLang may take: the free RAM less its 10 GiB reserve).
- bound by max-running-requests (the flag, or SGLang's speculative 48) below what the pools
  allow for the job's requests -> raise it to what the job runs at, at most what memory allows
  (and MAX_RAISE when the job's concurrency is not known).
- MTP whose accept length at the job's concurrency is under FALLING x its accept length at the
  lowest measured one (two concurrencies measured: the TUI's ledger keeps them; one live reading
  says how long the drafts are, not that they fall) -> one draft token fewer; --speculative-adaptive (only if the catalog has
  it); plain decoding.
- prompts longer than a prefill chunk while prefill takes more than PREFILL_SHARE of the time
  -> a chunk that holds the whole prompt (at most MAX_CHUNK).
- the job's concurrency above what the profile's memory allows at all -> said (a note).

Ordering: `gain`, the rough factor each change is expected to buy on the job's throughput, best
first (core/advice_gain.py: one request's prefill and decode time; a raise shortens decode,
hicache the prefill of prefixes it keeps). It orders the list, it is not a promise:
`job run --choose` measures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from sgltui.core import advice_gain, host_pool
from sgltui.core.files import write_atomic
from sgltui.core.flags import Catalog
from sgltui.core.profiles import Profile
from sgltui.core.situation import Situation
from sgltui.core.units import GIB
from sgltui.core.validate import catalog_for, check_profile

FALLING = 0.85  # accept length at the job's concurrency under this share of the lowest's
PREFILL_SHARE = 0.25  # prefill's share of the time above which the chunk size is proposed
MAX_CHUNK = 16384
MIN_HICACHE_RATIO = 1.0  # a host pool no larger than the device pool only warns in SGLang
MAX_HICACHE_RATIO = 8.0
HICACHE_SHARE_OF_FREE = 0.5  # what of the usable RAM a proposed host pool may take
CHUNK_SLACK_BYTES_PER_TOKEN = 1.5 * 2**20  # SGLang's activation reserve per chunk token
MAX_RAISE = 256  # SGLang's default cuda-graph-max-bs on a big GPU: above it decode runs eagerly
HICACHE_PAYS = 1.05  # a flag-bound profile gets hicache only where reuse buys more than this
SPEC_FLAGS = (
    "speculative-algorithm",
    "speculative-num-steps",
    "speculative-eagle-topk",
    "speculative-num-draft-tokens",
)


@dataclass
class Proposal:
    name: str
    delta: dict[str, Any]  # flag -> value; False removes the serving profile's flag
    reason: str
    figure: str
    cost: dict[str, Any]  # {"host_ram_gb", "gpu_gb", "text"}
    gain: float = 1.0  # expected throughput factor (ordering only)
    rule: str = ""
    warmup: int = 0  # requests its new server runs before its prefix cache is warm for the job

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "delta": dict(self.delta),
            "reason": self.reason,
            "figure": self.figure,
            "cost": dict(self.cost),
            "rule": self.rule,
            "gain": round(self.gain, 3),
            "warmup": self.warmup,
        }


@dataclass
class Advice:
    serving: str
    bound: str | None = None  # what bounds the serving profile (its card's `bound` text)
    proposals: list[Proposal] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)  # {"name", "rule", "why"}
    notes: list[str] = field(default_factory=list)
    serving_warmup: int = 0  # the same for a new server of the serving profile
    prefix: dict[str, float] | None = None  # the job's prefix reuse the advice read

    def as_json(self) -> dict[str, Any]:
        return {
            "serving": self.serving,
            "serving_warmup": self.serving_warmup,
            "prefix": self.prefix,
            "bound": self.bound,
            "proposals": [p.as_json() for p in self.proposals],
            "refused": list(self.refused),
            "notes": list(self.notes),
        }


# A check of a candidate's merged [server] flags: its errors, one line each (empty: it passes).
Check = Callable[[str, dict[str, Any]], list[str]]


def advise(
    s: Situation, check: Check | None = None, has_flag: Callable[[str], bool] | None = None
) -> Advice:
    """Every proposal for `s`, best first; `check` is the catalog and cross-flag check,
    `has_flag` whether the catalog knows a flag (for flags only some releases have)."""
    b = (s.card or {}).get("bound")
    out = Advice(s.serving, bound=str(b.get("text")) if isinstance(b, Mapping) else None)
    candidates: list[Proposal] = []
    allows = memory_allows(s)
    for rule in (_raise_mrr, _hicache, _speculative, _chunked):
        candidates.extend(rule(s, allows, has_flag or (lambda _n: True)))
    for p in candidates:
        merged = merge(s.server, p.delta)
        errors = check(p.name, merged) if check is not None else []
        if errors:
            out.refused.append({"name": p.name, "rule": p.rule, "why": errors[0]})
        else:
            out.proposals.append(p)
    out.proposals.sort(key=lambda p: -p.gain)
    for p in out.proposals:
        p.warmup = advice_gain.warmup(s, p.delta)
    out.serving_warmup = advice_gain.warmup(s)
    r = advice_gain.reuse(s)
    out.prefix = r.as_json() if r is not None else None
    note = _unreachable(s, allows)
    if note:
        out.notes.append(note)
    return out


def merge(server: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """The candidate's flags as a child profile resolves them (the delta wins)."""
    merged = dict(server)
    merged.update(delta)
    return merged


def profile_check(serving: Profile, catalog: Catalog | None = None) -> Check:
    """The catalog's and the cross-flag checks (core/validate.py) of a candidate that extends
    `serving`: its errors, one line each (warnings do not refuse a candidate)."""

    def check(name: str, server: dict[str, Any]) -> list[str]:
        child = dataclasses.replace(
            serving, name=name, extends=serving.name, server=server, key=None, origins={}
        )
        cat = catalog or catalog_for(serving)
        return [_issue_line(i) for i in check_profile(child, cat) if i.is_error]

    return check


def accepted_profile(serving: str, p: Proposal) -> dict[str, Any]:
    """The TOML document of an accepted proposal: it `extends` the serving profile (and so
    keeps its launcher, interpreter and environment), with the delta as its [server]."""
    return {
        "name": p.name,
        "description": f"proposed by sgltui advise: {p.rule} ({p.figure})"[:300],
        "extends": serving,
        "server": dict(p.delta),
    }


def write_accepted(serving: str, p: Proposal, folder: Path) -> Path:
    """Write the accepted proposal as FOLDER/NAME.toml (the user's profile folder)."""
    text = f"# Written by `sgltui advise`: {p.reason}\n" + tomli_w.dumps(
        accepted_profile(serving, p)
    )
    path = folder / f"{p.name}.toml"
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode())
    return path


# --- what the card says -------------------------------------------------------------------


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def bound_by(card: Mapping[str, Any] | None) -> str | None:
    b = (card or {}).get("bound")
    return str(b.get("by")) if isinstance(b, Mapping) and b.get("by") else None


def tokens_per_request(s: Situation) -> float | None:
    """What one of the job's requests holds in the KV pool at its end."""
    if s.prompt_tokens is None and s.output_tokens is None:
        return None
    return max(1.0, (s.prompt_tokens or 0.0) + (s.output_tokens or 0.0))


def memory_allows(s: Situation) -> tuple[int | None, str]:
    """(running requests the pools hold for the job's requests, what bounds that)."""
    card = s.card or {}
    caps: list[tuple[int, str]] = []
    slots, per = _int(card.get("mamba_state_slots")), _int(card.get("mamba_slots_per_request"))
    if slots and per:
        caps.append((slots // per, f"{slots} mamba state slots / {per} per request"))
    kv = _int(card.get("kv_pool_tokens"))
    per_req = tokens_per_request(s)
    if kv:
        if per_req:
            caps.append((int(kv // per_req), f"{kv} KV tokens / {per_req:.0f} per request"))
        else:
            caps.append((kv // 2, f"{kv} KV tokens / 2"))
    if not caps:
        return None, ""
    return min(caps)


def _target(s: Situation) -> int | None:
    if s.concurrency:
        return s.concurrency
    running = _int((s.engine or {}).get("num_running_reqs"))
    return running or None


def _demand(s: Situation) -> int | None:
    """How many requests would run at once if the flag let them: the job's concurrency, else
    what runs plus what waits while some wait. A server with nothing queued says nothing of
    the demand (its lone running request may be a probe, or a job not started yet): None, and
    the raise goes to what memory allows."""
    if s.concurrency:
        return s.concurrency
    engine = s.engine or {}
    running = _int(engine.get("num_running_reqs")) or 0
    queued = _int(engine.get("num_queue_reqs")) or 0
    return running + queued if queued > 0 else None


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


# --- the rules ----------------------------------------------------------------------------
Flags = Callable[[str], bool]


def _raise_mrr(s: Situation, allows: tuple[int | None, str], _has: Flags) -> list[Proposal]:
    card = s.card or {}
    mrr = _int(card.get("max_running_requests"))
    cap, why = allows
    if bound_by(card) not in ("flag", "speculative") or mrr is None or cap is None:
        return []
    want = _demand(s)
    new = min(MAX_RAISE, cap if want is None else min(cap, max(want, mrr)))
    if new < mrr + max(2, math.ceil(0.25 * mrr)):
        return []  # memory (or the job) leaves no worthwhile room above the flag
    cost_bytes = _mrr_gpu_bytes(s, new - mrr)
    gain = advice_gain.raise_gain(s, mrr, new, want)
    return [
        Proposal(
            name=f"{s.serving}+mrr{new}",
            delta={"max-running-requests": new},
            reason=f"max-running-requests = {mrr} bounds it while its pools hold {cap} of the "
            f"job's requests; {new} running requests at once"
            + (" is what the job runs at" if want and new == want else " is what memory allows"),
            figure=f"effective max running {mrr}; memory allows {cap} ({why})",
            cost={
                "host_ram_gb": 0.0,
                "gpu_gb": round(cost_bytes / GIB, 2),
                "text": f"about {_gib(cost_bytes)} of the GPU's KV pool "
                "(request table, and draft states on a hybrid MTP model)",
            },
            gain=gain,
            rule="raise-max-running",
        )
    ]


def _mrr_gpu_bytes(s: Situation, more: int) -> float:
    """What `more` running requests take from the KV pool: the request-to-token table, and on a
    hybrid MTP model each one's draft-token states (reference 1.4, 1.6)."""
    card = s.card or {}
    ctx = _int(card.get("context_length")) or 32768
    draft = _int(s.server.get("speculative-num-draft-tokens")) or 0
    table = more * (ctx + 4 + draft) * 4
    slots = _int(card.get("mamba_state_slots"))
    state_gb = _num(card.get("mamba_state_gb"))
    mrr = _int(card.get("max_running_requests")) or 0
    states = 0.0
    if draft and slots and state_gb:
        per_state = state_gb * GIB / (slots + 1 + (mrr + 1) * draft)
        states = more * draft * per_state
    return table + states


def memory_bound(s: Situation, allows: tuple[int | None, str]) -> str | None:
    """What bounds it, where a flag set at what the pools hold counts as the pool (capacity.py
    names the flag then: the flag was written to match the pool, the pool is the limit)."""
    by = bound_by(s.card)
    mrr = _int((s.card or {}).get("max_running_requests"))
    cap, why = allows
    if by in ("flag", "speculative") and cap is not None and mrr is not None and cap <= mrr:
        return "mamba" if "mamba" in why else "kv"
    return by


def _hicache(s: Situation, allows: tuple[int | None, str], _has: Flags) -> list[Proposal]:
    """HiCache where it can pay: the pools bound the profile (as before: the trial measures),
    or the job's prompts share prefixes the device pool cannot keep (evicted, recomputed) that
    a host pool would (core/advice_gain.py). It never raises max running (reference 3.3)."""
    card = s.card or {}
    by = memory_bound(s, allows)
    if host_pool.enabled(s.server) or s.host_free_bytes is None:
        return []
    device = (
        (_num(card.get("kv_pool_gb")) or 0.0) + (_num(card.get("mamba_state_gb")) or 0.0)
    ) * GIB
    if device <= 0:
        return []
    ranks = host_pool.ranks(s.server)
    usable = host_pool.usable_bytes(s.host_free_bytes) * HICACHE_SHARE_OF_FREE
    ratio = min(MAX_HICACHE_RATIO, math.floor(usable / (device * ranks) * 2) / 2)
    if ratio < MIN_HICACHE_RATIO:
        return []
    host = ratio * device * ranks
    mrr = _int(card.get("max_running_requests")) or 1
    kv_tokens = _num(card.get("kv_pool_tokens")) or 0.0
    gain, before, after = advice_gain.hicache_gain(s, mrr, ratio * kv_tokens)
    pays = s.prefix is not None and gain >= HICACHE_PAYS
    if by not in ("kv", "mamba") and not pays:
        return []
    what = "KV pool" if by == "kv" else "mamba state pool" if by == "mamba" else by
    r = advice_gain.reuse(s)
    if pays and r is not None:
        reason = (
            f"the job's prompts share {r.prefix_tokens:,.0f}-token prefixes ({r.sharing:.0%} of "
            f"them) over {r.working_set_tokens:,.0f} tokens, more than the device pool keeps: "
            f"a host pool of {ratio:g}x keeps them, reloaded at PCIe speed instead of "
            f"recomputed, so prefill falls from about {before:,.0f} to {after:,.0f} tokens a "
            f"request (max running stays {mrr}: SGLang sizes it before HiCache)"
        )
        figure = (
            f"prefix working set {r.working_set_tokens:,.0f} tokens vs a {kv_tokens:,.0f}-token "
            f"device pool; {_gib(s.host_free_bytes)} host RAM free after the standbys' pins; "
            f"expected x{gain:.2f}"
        )
    else:
        reason = (
            f"the {what} bounds it at {mrr} running; a host pool of {ratio:g}x the device pool "
            "keeps evicted prefixes (and states) in host RAM, reloaded at PCIe speed instead of "
            "recomputed (SGLang sizes max running before HiCache: it pays only where prompts "
            "share prefixes; the trial measures what it buys)"
        )
        figure = (
            f"bound by {by} at {mrr}; {_gib(s.host_free_bytes)} host RAM free after the "
            f"standbys' pins, device pool {_gib(device)}"
            + ("" if s.prefix is not None else "; the job's prefix reuse not known")
        )
    return [
        Proposal(
            name=f"{s.serving}+hicache",
            delta={"enable-hierarchical-cache": True, "hicache-ratio": ratio},
            reason=reason,
            figure=figure,
            cost={
                "host_ram_gb": round(host / GIB, 1),
                "gpu_gb": 0.0,
                "text": f"{_gib(host)} of pinned host RAM; nothing on the GPU",
            },
            gain=gain,
            rule="hicache",
        )
    ]


def _speculative(s: Situation, _allows: tuple[int | None, str], has: Flags) -> list[Proposal]:
    algo = s.server.get("speculative-algorithm")
    if not algo:
        return []
    steps = _int(s.server.get("speculative-num-steps")) or 3
    topk = _int(s.server.get("speculative-eagle-topk")) or 1
    want = _target(s)
    measured = dict(s.accept_by_c)
    live = _num((s.engine or {}).get("accept_length"))
    running = _int((s.engine or {}).get("num_running_reqs"))
    if live is not None and running and running not in measured:
        measured[running] = live
    if len(measured) < 2 or want is None:
        return []  # one concurrency says how long the drafts are, not that they fall
    at = max((c for c in measured if c <= want), default=min(measured))
    low = min(measured)
    if low >= at:
        return []
    base, now = measured[low], measured[at]
    if now >= FALLING * base:
        return []
    figure = f"accept length {now:.2f} at c={at} vs {base:.2f} at c={low} (under {FALLING:.0%})"
    out: list[Proposal] = []
    mrr = _int((s.card or {}).get("max_running_requests")) or 0
    if steps >= 2:
        per_state = 0.0
        card = s.card or {}
        slots, state_gb = _int(card.get("mamba_state_slots")), _num(card.get("mamba_state_gb"))
        if slots and state_gb:
            per_state = state_gb * GIB / (slots + 1 + (mrr + 1) * (steps + 1))
        freed = (mrr + 1) * per_state
        delta: dict[str, Any] = {
            "speculative-num-steps": steps - 1,
            "speculative-num-draft-tokens": steps if topk == 1 else steps * topk,
        }
        out.append(
            Proposal(
                name=f"{s.serving}-steps{steps - 1}",
                delta=delta,
                reason=f"acceptance falls at the job's concurrency: the last draft step is "
                f"mostly rejected, so {steps - 1} steps verify fewer tokens per request for "
                "nearly the same accept length",
                figure=figure,
                cost={
                    "host_ram_gb": 0.0,
                    "gpu_gb": -round(freed / GIB, 2) if freed else 0.0,
                    "text": f"frees about {_gib(freed)} of draft states on the GPU"
                    if freed
                    else "none",
                },
                gain=1.0 + 0.5 * (1.0 - now / base),
                rule="fewer-draft-tokens",
            )
        )
    if has("speculative-adaptive") and not s.server.get("speculative-adaptive"):
        out.append(
            Proposal(
                name=f"{s.serving}+adaptive",
                delta={"speculative-adaptive": True},
                reason="acceptance falls at the job's concurrency: adaptive speculation lets "
                "SGLang shorten the draft as the batch grows",
                figure=figure,
                cost={"host_ram_gb": 0.0, "gpu_gb": 0.0, "text": "none"},
                gain=1.0 + 0.4 * (1.0 - now / base),
                rule="speculative-adaptive",
            )
        )
    plain = {f: False for f in SPEC_FLAGS if f in s.server}
    if "max-running-requests" in s.server:
        plain["max-running-requests"] = False  # plain decoding: memory decides, not MTP's cap
    out.append(
        Proposal(
            name=f"{s.serving}-plain",
            delta=plain,
            reason="acceptance falls at the job's concurrency: without the draft, the verify "
            "over several tokens per request and the draft states no longer cost anything",
            figure=figure,
            cost={
                "host_ram_gb": 0.0,
                "gpu_gb": 0.0,
                "text": "none (frees the draft's weights and states)",
            },
            gain=1.0 + 0.2 * (1.0 - now / base),
            rule="plain",
        )
    )
    return out


def _chunked(s: Situation, _allows: tuple[int | None, str], _has: Flags) -> list[Proposal]:
    e, card = s.engine or {}, s.card or {}
    chunk = _int(s.server.get("chunked-prefill-size")) or _int(card.get("chunked_prefill_size"))
    prefill, gen = _num(e.get("input_throughput")), _num(e.get("gen_throughput"))
    if not chunk or chunk <= 0 or not s.prompt_tokens or not s.output_tokens:
        return []
    if s.prompt_tokens <= chunk or not prefill or not gen:
        return []
    # Prompt tokens the job needs per second at its decode rate, over what prefill gives.
    share = (gen / s.output_tokens * s.prompt_tokens) / prefill
    if share <= PREFILL_SHARE:
        return []
    new = min(MAX_CHUNK, 1 << math.ceil(math.log2(s.prompt_tokens)))
    if new <= chunk:
        return []
    slack = (new - chunk) * CHUNK_SLACK_BYTES_PER_TOKEN
    return [
        Proposal(
            name=f"{s.serving}+chunk{new}",
            delta={"chunked-prefill-size": new},
            reason=f"the job's prompts ({s.prompt_tokens:.0f} tokens) take "
            f"{math.ceil(s.prompt_tokens / chunk)} chunks of {chunk} each, and prefill takes "
            f"{share:.0%} of the time; a {new}-token chunk prefills each prompt in one pass "
            "(each pass stalls decodes longer, but once)",
            figure=f"prefill {prefill:.0f} tok/s, decode {gen:.0f} tok/s, prompts "
            f"{s.prompt_tokens:.0f} tokens, chunk {chunk}",
            cost={
                "host_ram_gb": 0.0,
                "gpu_gb": round(slack / GIB, 2),
                "text": f"about {_gib(slack)} more activation slack on the GPU (SGLang takes it "
                "from the KV pool when mem-fraction-static is automatic)",
            },
            gain=1.0 + 0.3 * min(1.0, share),
            rule="chunked-prefill",
        )
    ]


def _unreachable(s: Situation, allows: tuple[int | None, str]) -> str | None:
    cap, why = allows
    want = s.concurrency
    if cap is None or want is None or want <= cap:
        return None
    return (
        f"{s.serving} cannot run the job's {want} requests at once: its memory holds {cap} "
        f"({why}); a proposal above, a smaller context or fp8 KV are the ways up"
    )


def _issue_line(issue: Any) -> str:
    fix = f" ({issue.fix})" if issue.fix else ""
    return f"{issue.key or 'profile'}: {issue.problem}{fix}"
