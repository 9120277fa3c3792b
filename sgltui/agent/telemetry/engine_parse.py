"""Turn SGLang's /metrics text and /v1/loads JSON into one ENGINE dict (sgltui/protocol/).

SGLang's metric rules (sglang/srt/metrics/collector.py): scheduler gauges are published by attention-TP rank 0 of
each DP group, so only rank-0 series are read (with --enable-metrics-for-all-schedulers every rank
publishes and summing would multiply by TP); radix/hicache counters are reported by every rank, so
they are read from rank 0 too; per-DP values are then summed (requests, throughput, tokens) or
combined (usage: the fullest pool; hit rate and accept length: the mean). Priority-split series
are skipped in favour of the totals (priority=""). Missing series are simply None.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

# Labels that name a rank inside one DP group: only rank 0 speaks for the group.
_RANK_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank", "attn_cp_rank")

ENGINE_KEYS = (
    "gen_throughput",
    "num_running_reqs",
    "num_queue_reqs",
    "token_usage",
    "accept_length",
    "max_running_requests",
    "max_total_num_tokens",
    "cache_hit_rate",
)


def empty_engine(source: str, ts: float) -> dict[str, Any]:
    e: dict[str, Any] = {"source": source, "ts": ts}
    for k in ENGINE_KEYS:
        e[k] = None
    return e


def _rank0(labels: dict[str, str]) -> bool:
    return (
        all(labels.get(k, "0") in ("0", "") for k in _RANK_LABELS)
        and labels.get("priority", "") == ""
    )


# Series read per label value too (SGLang 0.5.23 metrics_collector.py): sample name -> label.
_BY_LABEL = {
    "sglang:cached_tokens_total": "cache_source",  # device | host | storage
    "sglang:prefill_effective_tokens_total": "mode",  # input | device_hit | host_hit | storage_hit
}


def metric_samples(text: str, names: Iterable[str] | None = None) -> list[Sample]:
    """Every sample of a Prometheus text (SGLang's /metrics, the pool gateway's): one reading of
    the format for both. ValueError for a torn or malformed text.

    `names`: only samples of these names are wanted. The other lines (histogram buckets are
    most of SGLang's text) are dropped before the parser sees them: parsing every line of every
    server each second was most of an 8-slot agent's CPU. The lines kept are read by a plain
    reader (below) when every one of them is simple; any other text goes to prometheus_client."""
    if names is not None:
        text = only_samples(text, names)
        fast = _simple_samples(text)
        if fast is not None:
            return fast
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def only_samples(text: str, names: Iterable[str]) -> str:
    """The sample lines of `text` whose metric name is one of `names` (comments dropped)."""
    keep = _sample_lines(frozenset(names)).findall(text)
    return "\n".join(keep) + "\n" if keep else ""


@functools.lru_cache(maxsize=16)
def _sample_lines(wanted: frozenset[str]) -> re.Pattern[str]:
    """A line that starts with one of `wanted` followed by its labels, a space or its end (a
    name is the line up to its first "{" or " "). One regex scan instead of a Python loop over every line:
    SGLang's text is mostly histogram buckets that nobody here reads."""
    names = "|".join(re.escape(n) for n in sorted(wanted, key=len, reverse=True))
    return re.compile(rf"^(?:{names})(?=[{{ \r]|$)[^\r\n]*", re.MULTILINE)


# `name="value"` pairs of a label set whose values hold no backslash (no escapes to undo).
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"\\]*)"\s*(?:,|$)')


def _simple_samples(text: str) -> list[Sample] | None:
    """The samples of sample lines `name{labels} value` (no comments: only_samples' output),
    as prometheus_client reads them; None when a line is anything else (escapes, a timestamp,
    an odd label set): the caller then gives the text to prometheus_client, which also says
    what is wrong with a malformed one. Why: prometheus_client's parser walks each label
    character by character, and 8 servers' polls plus the gateway's are read every second."""
    out = []
    for line in text.splitlines():
        if not line:
            continue
        if "\\" in line:
            return None
        brace = line.find("{")
        labels: dict[str, str] = {}
        if brace < 0:
            parts = line.split()
            if len(parts) != 2:
                return None
            name, rest = parts[0], parts[1:]
        else:
            close = line.rfind("}")
            if close < brace:
                return None
            name = line[:brace]
            body, pos = line[brace + 1 : close], 0
            while pos < len(body):
                m = _LABEL.match(body, pos)
                if m is None or m.end() == pos:
                    if body[pos:].strip():
                        return None
                    break
                labels[m.group(1)] = m.group(2)
                pos = m.end()
            rest = line[close + 1 :].split()
        if len(rest) != 1 or not name or name != name.strip() or "__name__" in labels:
            return None
        if "_" in rest[0]:
            return None
        try:  # as prometheus_client reads a value: an int where it is one
            value: float = int(rest[0])
        except ValueError:
            try:
                value = float(rest[0])
            except ValueError:
                return None
        out.append(Sample(name, labels, value))
    return out


def parse_metrics(
    text: str, names: Iterable[str] | None = None
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, float]]]:
    """(parse_metrics_text's dict, {sample name: {label value: rank-0 sum over DP}} for _BY_LABEL)."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    labelled: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in metric_samples(text, names):
        if not _rank0(s.labels):
            continue
        out[s.name][s.labels.get("dp_rank", "0")].append(float(s.value))
        label = _BY_LABEL.get(s.name)
        if label and label in s.labels:
            labelled[s.name][s.labels[label]] += float(s.value)
    return out, labelled


def parse_metrics_text(text: str) -> dict[str, dict[str, list[float]]]:
    """{metric sample name: {dp_rank: [values of rank-0 series]}} for every sample in the text."""
    return parse_metrics(text)[0]


def _per_dp(m: dict, name: str) -> list[float]:
    """One value per DP group (a group's several label sets, e.g. is_streaming, are summed)."""
    return [sum(vals) for vals in m.get(name, {}).values() if vals]


def _sum(m: dict, name: str) -> float | None:
    vals = _per_dp(m, name)
    return sum(vals) if vals else None


def _max(m: dict, name: str) -> float | None:
    vals = _per_dp(m, name)
    return max(vals) if vals else None


def _mean(m: dict, name: str) -> float | None:
    vals = _per_dp(m, name)
    return sum(vals) / len(vals) if vals else None


def _int(v: float | None) -> int | None:
    return None if v is None else int(round(v))


# Every sample name engine_from_metrics reads (metric_samples drops the others unparsed).
ENGINE_METRICS = frozenset(
    {
        "sglang:gen_throughput",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:cache_hit_rate",
        "sglang:spec_accept_length",
        "sglang:max_total_num_tokens",
        "sglang:spec_accept_rate",
        "sglang:num_retracted_reqs",
        "sglang:mamba_usage",
        "sglang:hicache_host_used_tokens",
        "sglang:hicache_host_total_tokens",
        "sglang:hicache_host_mamba_used_states",
        "sglang:hicache_host_mamba_total_states",
        "sglang:context_len",
        "sglang:num_requests_total",
        "sglang:generation_tokens_total",
        "sglang:prompt_tokens_total",
        *_BY_LABEL,
    }
)


def engine_from_metrics(text: str, ts: float) -> dict[str, Any]:
    m, labelled = parse_metrics(text, ENGINE_METRICS)
    e = empty_engine("metrics", ts)
    e["gen_throughput"] = _sum(m, "sglang:gen_throughput")
    e["num_running_reqs"] = _int(_sum(m, "sglang:num_running_reqs"))
    e["num_queue_reqs"] = _int(_sum(m, "sglang:num_queue_reqs"))
    e["token_usage"] = _max(m, "sglang:token_usage")
    e["cache_hit_rate"] = _mean(m, "sglang:cache_hit_rate")
    accept = _mean(m, "sglang:spec_accept_length")
    e["accept_length"] = (
        accept if accept is not None and accept >= 1.0 else None
    )  # exported as 0 when unused
    e["max_total_num_tokens"] = _int(_sum(m, "sglang:max_total_num_tokens"))
    rate = _mean(m, "sglang:spec_accept_rate")
    e["accept_rate"] = rate if e["accept_length"] is not None else None
    e["num_retracted_reqs"] = _int(_sum(m, "sglang:num_retracted_reqs"))
    e["mamba_usage"] = _max(m, "sglang:mamba_usage")
    used, total = (
        _sum(m, "sglang:hicache_host_used_tokens"),
        _sum(m, "sglang:hicache_host_total_tokens"),
    )
    e["hicache_host_usage"] = used / total if used is not None and total else None
    e["hicache_host_used_tokens"] = _int(used)
    e["hicache_host_total_tokens"] = _int(total)
    e["hicache_host_mamba_used_states"] = _int(_sum(m, "sglang:hicache_host_mamba_used_states"))
    e["hicache_host_mamba_total_states"] = _int(_sum(m, "sglang:hicache_host_mamba_total_states"))
    # Cumulative counters by source: prompt tokens served from each cache tier, and prefill
    # tokens by how they were obtained (computed = "input", or a hit in a tier).
    cached = labelled.get("sglang:cached_tokens_total")
    e["cached_tokens_by_source"] = {k: int(v) for k, v in cached.items()} if cached else None
    prefill = labelled.get("sglang:prefill_effective_tokens_total")
    e["prefill_tokens_by_mode"] = {k: int(v) for k, v in prefill.items()} if prefill else None
    e["context_len"] = _int(_max(m, "sglang:context_len"))
    e["requests_total"] = _int(_sum(m, "sglang:num_requests_total"))
    e["generation_tokens_total"] = _int(_sum(m, "sglang:generation_tokens_total"))
    e["prompt_tokens_total"] = _int(_sum(m, "sglang:prompt_tokens_total"))
    return e


def engine_from_loads(data: dict[str, Any], ts: float) -> dict[str, Any]:
    """/v1/loads: SGLang returns `{"loads": [...]}`, one entry per DP rank."""
    loads = (
        [x for x in (data.get("loads") or []) if isinstance(x, dict)]
        if isinstance(data, dict)
        else []
    )
    e = empty_engine("loads", ts)
    if not loads:
        return e

    def vals(key: str, section: str | None = None) -> list[float]:
        out = []
        for ld in loads:
            src = ld.get(section) if section else ld
            v = src.get(key) if isinstance(src, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(float(v))
        return out

    def agg(key: str, how, section: str | None = None):
        v = vals(key, section)
        return how(v) if v else None

    mean = lambda v: sum(v) / len(v)  # noqa: E731
    e["gen_throughput"] = agg("gen_throughput", sum)
    e["num_running_reqs"] = _int(agg("num_running_reqs", sum))
    e["num_queue_reqs"] = _int(agg("num_waiting_reqs", sum))
    e["token_usage"] = agg("token_usage", max)
    e["cache_hit_rate"] = agg("cache_hit_rate", mean)
    e["max_running_requests"] = _int(agg("max_running_requests", sum))
    e["max_total_num_tokens"] = _int(agg("max_total_num_tokens", sum))
    accept = agg("accept_length", mean, "speculative")
    e["accept_length"] = accept if accept is not None and accept >= 1.0 else None
    rate = agg("accept_rate", mean, "speculative")
    e["accept_rate"] = rate if e["accept_length"] is not None else None
    e["num_used_tokens"] = _int(agg("num_used_tokens", sum))
    return e


def merge_engine(
    primary: dict[str, Any] | None, secondary: Iterable[dict[str, Any] | None]
) -> dict[str, Any] | None:
    """The primary reading with its missing fields filled from the others (e.g. accept length
    from the log when /v1/loads lacks it). `source` stays the primary's."""
    others = [s for s in secondary if s is not None]
    if primary is None:
        if not others:
            return None
        primary, others = others[0], others[1:]
    out = dict(primary)
    for s in others:
        if s is None:
            continue
        for k, v in s.items():
            if out.get(k) is None and v is not None and k not in ("source", "ts"):
                out[k] = v
    return out
