"""The insight card: is this profile's speculative decoding or HiCache paying off, and what
bounds its concurrency?

Pure computation over what telemetry already carries: ENGINE readings (sgltui/protocol/), the
capacity card of each launch (core/capacity.py) and bench results (bench/<run-id>.json). A
`Ledger` remembers, per profile, the per-request decode speed measured at each concurrency, from
live readings (gen_throughput / num_running_reqs while requests run) and from bench points
(per_user_tok_s, which wins over live figures at the same concurrency). Comparisons are made only
at concurrencies both profiles were measured at: nothing is extrapolated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sgltui.core import units

MIN_LIVE_READINGS = 3  # live reports at one concurrency before it counts as measured


@dataclass
class Figures:
    """What was measured for one profile."""

    name: str
    card: dict[str, Any] | None = None
    engine: dict[str, Any] | None = None  # the latest reading
    live: dict[int, list[float]] = field(default_factory=dict)  # c -> [sum per-request tok/s, n]
    bench_per_request: dict[int, float] = field(default_factory=dict)
    bench_total: dict[int, float] = field(default_factory=dict)
    accept: dict[int, list[float]] = field(default_factory=dict)  # c -> [sum accept length, n]
    last_pair: tuple[Any, Any] | None = None  # (running, gen_throughput) last counted

    @property
    def speculative(self) -> bool:
        card = self.card or {}
        engine = self.engine or {}
        return bool(card.get("speculative_algorithm")) or engine.get("accept_length") is not None

    @property
    def hicache(self) -> bool:
        card = self.card or {}
        engine = self.engine or {}
        return bool(card.get("hicache_host_gb") or engine.get("hicache_host_total_tokens"))

    @property
    def max_running(self) -> int | None:
        value = (self.card or {}).get("max_running_requests")
        return value if isinstance(value, int) else None

    def concurrencies(self) -> set[int]:
        live = {c for c, (_s, n) in self.live.items() if n >= MIN_LIVE_READINGS}
        return live | set(self.bench_per_request)

    def per_request(self, c: int) -> float | None:
        if c in self.bench_per_request:
            return self.bench_per_request[c]
        total, n = self.live.get(c, (0.0, 0))
        return total / n if n >= MIN_LIVE_READINGS else None

    def accept_by_c(self) -> dict[int, float]:
        """The mean accept length measured at each concurrency (core/advice.py reads whether it
        falls as the batch grows)."""
        return {c: total / n for c, (total, n) in self.accept.items() if n >= MIN_LIVE_READINGS}

    def total(self, c: int) -> float | None:
        if c in self.bench_total:
            return self.bench_total[c]
        per = self.per_request(c)
        return per * c if per is not None else None


class _Point(msgspec.Struct):
    """The figures of an ENGINE reading that the ledger counts, read out of many readings in
    one conversion (`Ledger.observe_engines`): the type checks made in C, not three
    isinstance and four dict.get per reading. Any other key is ignored; a value of another
    type (a bool, a string) fails the conversion, and those readings are read one by one."""

    num_running_reqs: float | None = None
    gen_throughput: float | None = None
    accept_length: float | None = None


def _fresh(seen: dict[str, Any], name: str, engine: dict[str, Any]) -> bool:
    """Whether `engine`'s stamp is not the one `name` counted last (noted if not)."""
    stamp = engine.get("ts")
    if seen.get(name) == stamp:  # (a first reading with no stamp: as if counted)
        return False
    seen[name] = stamp
    return True


class Ledger:
    """Per-profile figures for one session (bounded: one bucket per concurrency level)."""

    def __init__(self) -> None:
        self.profiles: dict[str, Figures] = {}

    def figures(self, name: str) -> Figures:
        found = self.profiles.get(name)  # (not setdefault: a Figures made per call, then dropped)
        if found is None:
            found = self.profiles[name] = Figures(name)
        return found

    def observe_engine(self, name: str, engine: dict[str, Any] | None) -> None:
        """The latest ENGINE reading of `name`. gen_throughput and num_running_reqs are published
        together (each decode-log-interval, and at prefill batches), so a reading counts as a live
        point only when that pair changed: a repeated pair is the same report read again (with
        short MTP requests SGLang may not republish for many seconds), not a new measurement.
        The gauge is in the server's own time, so a sped-up simulator compares fairly too."""
        if not engine:
            return
        f = self.profiles[name] if name in self.profiles else self.figures(name)
        f.engine = engine
        running, throughput = engine.get("num_running_reqs"), engine.get("gen_throughput")
        if (running, throughput) == f.last_pair:
            return
        f.last_pair = (running, throughput)
        # The point and the accept length of one reading share its concurrency: worked out
        # once for both (_count).
        if isinstance(running, float) and running.is_integer():
            running = int(running)
        if not isinstance(running, int) or running <= 0:
            return
        length = engine.get("accept_length")
        self._count(
            f,
            running,
            throughput if isinstance(throughput, (int, float)) else None,
            length if isinstance(length, (int, float)) else None,
        )

    def observe_engines(
        self,
        readings: Sequence[tuple[str, dict[str, Any]]],
        seen: dict[str, Any] | None = None,
    ) -> None:
        """`observe_engine` of each (profile, reading), in order, their figures converted in
        one go (a hidden Insight tab folds 8 slots' readings of every second: ~12 calls a
        reading one by one, none here). A reading that does not convert: one by one, as before.

        `seen` (profile -> the stamp of its reading counted last): a reading with its
        profile's last stamp is skipped (a status refresh repeats the reading), before it
        reaches the profile's figures; an empty one is skipped before its stamp is noted."""
        try:
            points = msgspec.convert([engine for _name, engine in readings], list[_Point])
        except msgspec.ValidationError:
            for name, engine in readings:
                if engine and (seen is None or _fresh(seen, name, engine)):
                    self.observe_engine(name, engine)
            return
        profiles = self.profiles
        for (name, engine), point in zip(readings, points, strict=True):
            if not engine:
                continue
            if seen is not None:  # (inline: a call per reading here is what the batch saves)
                stamp = engine["ts"] if "ts" in engine else None
                if (seen[name] if name in seen else None) == stamp:
                    continue
                seen[name] = stamp
            f = profiles[name] if name in profiles else self.figures(name)
            f.engine = engine
            running, throughput = point.num_running_reqs, point.gen_throughput
            # (3 read as 3.0 compares equal: the pair is the one observe_engine keeps)
            if (running, throughput) == f.last_pair:
                continue
            f.last_pair = (running, throughput)
            # a whole count of requests, as observe_engine takes it (NaN and inf fail too)
            if running is None or not running > 0 or running % 1 != 0:
                continue
            # _count's rule inline (a call and two dict.get per reading: 24 calls a second
            # for 8 slots): the tok/s per request where the throughput is above 0, and the
            # accept length, each in its concurrency's bucket.
            c = int(running)
            if throughput is not None and throughput > 0:
                live = f.live
                if c in live:
                    bucket = live[c]
                    bucket[0] += throughput / c
                    bucket[1] += 1
                else:
                    live[c] = [throughput / c, 1]
            length = point.accept_length
            if length is not None:
                accept = f.accept
                if c in accept:
                    bucket = accept[c]
                    bucket[0] += length
                    bucket[1] += 1
                else:
                    accept[c] = [length, 1]

    @staticmethod
    def _count(f: Figures, c: int, throughput: float | None, length: float | None) -> None:
        """A reading at `c` running requests (a whole count above 0) into `f`'s buckets: its
        tok/s per request where its throughput is above 0, and its accept length."""
        if throughput is not None and throughput > 0:
            bucket = f.live.get(c)
            if bucket is None:
                bucket = f.live[c] = [0.0, 0]
            bucket[0] += throughput / c
            bucket[1] += 1
        if length is not None:
            bucket = f.accept.get(c)
            if bucket is None:
                bucket = f.accept[c] = [0.0, 0]
            bucket[0] += float(length)
            bucket[1] += 1

    def interrupt(self) -> None:
        """A launch or swap is under way: the next reading is a new report whatever it says."""
        for f in self.profiles.values():
            f.last_pair = None

    def observe_card(self, name: str, card: dict[str, Any] | None) -> None:
        if card:
            self.figures(name).card = card

    def observe_bench(self, result: dict[str, Any] | None) -> None:
        for row in (result or {}).get("results") or []:
            metrics = row.get("metrics") if isinstance(row, dict) else None
            c = row.get("concurrency") if isinstance(row, dict) else None
            if not isinstance(metrics, dict) or not isinstance(c, int) or row.get("error"):
                continue
            f = self.figures(str(row.get("profile") or "server"))
            per, total = metrics.get("per_user_tok_s"), metrics.get("output_throughput")
            if isinstance(per, (int, float)) and per == per:  # not NaN
                f.bench_per_request[c] = float(per)
            if isinstance(total, (int, float)) and total == total:
                f.bench_total[c] = float(total)
            if isinstance(row.get("capacity"), dict) and f.card is None:
                f.card = row["capacity"]

    def baseline(self, name: str, feature: str) -> Figures | None:
        """The profile to compare `name` with: `feature` ("speculative" or "hicache") off,
        preferably the other feature as in `name`; the best-measured such profile."""
        me = self.profiles.get(name)
        other = "hicache" if feature == "speculative" else "speculative"
        pool = [
            f
            for f in self.profiles.values()
            if f.name != name
            and (f.card is not None or f.concurrencies())
            and not getattr(f, feature)
        ]
        same = [f for f in pool if me is None or getattr(f, other) == getattr(me, other)]
        return max(same or pool, key=lambda f: len(f.concurrencies()), default=None)


def speculative_lines(me: Figures, base: Figures | None) -> tuple[list[str], str]:
    """(detail lines, verdict) for a speculative profile."""
    e = me.engine or {}
    lines = []
    length, rate = e.get("accept_length"), e.get("accept_rate")
    if length is not None:
        rate_text = f", rate {rate:.0%}" if isinstance(rate, (int, float)) else ""
        lines.append(f"accept length {length:.2f}{rate_text}")
    else:
        lines.append("accept length: no decode measured yet")
    if base is None:
        return lines, "no non-speculative profile measured yet: run one at the same load to compare"
    shared = sorted(me.concurrencies() & base.concurrencies())
    if not shared:
        seen = sorted(me.concurrencies())
        where = f" (this one measured at c={','.join(map(str, seen))})" if seen else ""
        return lines, f"not yet comparable with {base.name} at the same concurrency{where}"
    ratios = {
        c: mine / theirs
        for c in shared
        if (mine := me.per_request(c)) is not None and (theirs := base.per_request(c))
    }
    lines.append(
        "per request vs "
        + base.name
        + ": "
        + ", ".join(f"{r:.1f}x at c={c}" for c, r in ratios.items())
    )
    c0 = shared[0]
    verdict = f"{_short(me.name)} {ratios.get(c0, 0):.1f}x per request at c={c0}"
    my_best = max((me.total(c) or 0.0) for c in me.concurrencies())
    mrr, base_mrr = me.max_running, base.max_running
    crossover = next(
        (c for c in sorted(base.concurrencies()) if (base.total(c) or 0.0) > my_best), None
    )
    capped = mrr is not None and (base_mrr is None or mrr < base_mrr)
    if crossover is not None:
        cap_text = f", but max running {mrr}" if capped else ""
        verdict += f"{cap_text}: at c>={crossover} {base.name} finishes the job first"
    elif capped:
        verdict += (
            f", max running {mrr} vs {base_mrr if base_mrr is not None else '?'}: "
            f"{base.name} not yet measured above c={max(base.concurrencies())} to find where it wins"
        )
    else:
        verdict += f": ahead at every measured concurrency (c<={shared[-1]})"
    return lines, verdict


def hicache_lines(me: Figures, base: Figures | None) -> tuple[list[str], str]:
    e = me.engine or {}
    lines = []
    used, total = e.get("hicache_host_used_tokens"), e.get("hicache_host_total_tokens")
    pool = f"host pool {units.sig3(used, '?')} / {units.sig3(total, '?')} tokens"
    m_used, m_total = (
        e.get("hicache_host_mamba_used_states"),
        e.get("hicache_host_mamba_total_states"),
    )
    if m_total:
        pool += f", mamba states {m_used or 0} / {m_total}"
    lines.append(pool)
    modes = e.get("prefill_tokens_by_mode") or {}
    hits = {k: int(modes.get(k, 0)) for k in ("device_hit", "host_hit", "storage_hit")}
    seen = int(modes.get("input", 0)) + sum(hits.values())
    saved = sum(hits.values())
    if seen:
        parts = [f"device {hits['device_hit'] / seen:.0%}", f"host {hits['host_hit'] / seen:.0%}"]
        if hits["storage_hit"]:
            parts.append(f"storage {hits['storage_hit'] / seen:.0%}")
        lines.append(
            "hit rate " + ", ".join(parts) + f"; prefill tokens saved {units.sig3(saved, '?')}"
        )
    else:
        lines.append("hit rate: no prefill measured yet")
    mrr = me.max_running
    if base is not None and base.max_running is not None:
        verdict = f"max running {mrr} (without HiCache, {base.name}: {base.max_running})"
        if mrr is not None and mrr <= base.max_running:
            verdict += ": HiCache saves prefill, it does not raise concurrency"
    else:
        verdict = f"max running {mrr}: HiCache saves prefill, it does not raise concurrency"
    if seen and hits["host_hit"] == 0:
        verdict += "; no host hits yet (the device cache still holds every reused prefix)"
    return lines, verdict


def _short(name: str) -> str:
    """'demo-mtp-hicache' -> 'MTP' for the verdict's first word (the profile's feature)."""
    return "MTP" if "mtp" in name.lower() and "no-mtp" not in name.lower() else "speculative"


def card(ledger: Ledger, name: str) -> dict[str, Any]:
    """The insight card of profile `name`: {"profile", "kinds", "bound", "sections": [{"title",
    "lines", "verdict"}]}."""
    me = ledger.figures(name)
    bound = (me.card or {}).get("bound")
    out: dict[str, Any] = {
        "profile": name,
        "kinds": [],
        "bound": bound.get("text") if isinstance(bound, dict) else None,
        "sections": [],
    }
    if me.speculative:
        base = ledger.baseline(name, "speculative")
        lines, verdict = speculative_lines(me, base)
        out["kinds"].append("speculative")
        out["sections"].append({"title": "speculative", "lines": lines, "verdict": verdict})
    if me.hicache:
        base = ledger.baseline(name, "hicache")
        lines, verdict = hicache_lines(me, base)
        out["kinds"].append("hicache")
        out["sections"].append({"title": "hicache", "lines": lines, "verdict": verdict})
    return out
