"""The trial that lets a job choose its profile: the statistics and the decision (pure; no I/O).

`sgltui job run IN.jsonl --choose A,B,C` runs the job's own next requests on each candidate in
turn and keeps every answer (speculative decoding and hicache change speed, not what is
generated). This module holds what the agent needs to drive that, as plain JSON-able dicts so the
whole state is saved in the job's record and a restarted agent resumes the trial where it was:

- `Trial`: which candidate is measured now, each one's measured output tok/s with a 95% interval
  (batch means over the measured window: the window is cut into equal-time batches, their rates
  are the samples; a closed loop's completions arrive in waves, so single progress ticks are not
  independent, batches of several ticks nearly are), the requests, tokens and joules it used;
- the stop rule: the interval within +-5% (after enough completions to cover two waves of the
  concurrency), or the interval wholly below the leader's (a clear loser: `clear_loser`), or,
  for the last candidate to measure, the 95% interval of its lead over every other one above
  zero (a clear winner: `clear_winner`, which ends the trial on the candidate the job already
  runs), or, for one
  that is not the last, wholly above every measured one's (it leads so far: `clear_leader`),
  or a cap on requests or minutes; a new server's first window is cold until its prefix cache
  is warm for the job (`warmup`): there only the stops that end the trial on it apply (a cold
  rate is a low estimate), and the window starts again once warm;
- the readings: every 0.25 s of the server's time (`reading_s`: the simulator's time scale,
  20 ms of wall time at least), like the minimum window;
- the projection: remaining output tokens (remaining requests x the mean output length seen so
  far) / measured tok/s, plus the measured swap to it unless it already runs; with the energy
  objective, remaining tokens x measured joules per token plus the swap's joules;
- `Watch`: after the decision, the measured rate more than 15% below the projection for 5 minutes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, Protocol

CI_TARGET = 0.05  # the 95% interval's half-width, relative to the estimate
CI_WIDE = 0.10  # ... for a candidate measured before one advise expects far more of
FAR_AHEAD = 1.5  # "far more": an expected gain this many times the candidate's
DIFF_WIDEN = 1.15  # clear_winner: the difference's 95% half-width x this, for the repeated looks
# (bench/bench_sequential_stop.py: 1.0 stopped on a candidate truly 2% slower in 4.65% of trials,
# too near the 5% budget; 1.15 in 2.70%)
MIN_BATCHES = 6
MAX_BATCHES = 12
MIN_WINDOW_S = 3.0  # of the server's time (wall seconds / the simulator's time scale)
READING_S = 0.25  # a trial's progress reading, of the server's time (MIN_BATCHES need 13) ...
READING_MIN_S = 0.02  # ... but never more often than this in wall time (the runner's floor)
DEFAULT_CAP_REQUESTS = 2000
DEFAULT_CAP_MINUTES = 10.0
WATCH_BELOW = 0.15  # the rate falls more than 15% below the projection ...
WATCH_FOR_S = 300.0  # ... for 5 minutes
MAX_POINTS = 2000  # progress points kept per candidate (thinned beyond; the record stays small)

OBJECTIVES = ("time", "energy")

# t quantiles (0.975) for n-1 degrees of freedom, 1..30; the normal quantile beyond
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    if df < 1:
        return math.inf
    return _T975[df - 1] if df <= len(_T975) else 1.96


def parse_candidates(text: str) -> list[str]:
    """'a,b, c' -> ['a', 'b', 'c'] (each once, in order); a ValueError says what is wrong."""
    names = [n.strip() for n in str(text).split(",")]
    names = [n for n in names if n]
    if not names:
        raise ValueError("--choose needs profile names separated by commas, e.g. mtp,no-mtp")
    seen: list[str] = []
    for n in names:
        if n in seen:
            raise ValueError(f"--choose names {n!r} twice; give each profile once")
        seen.append(n)
    return seen


def rate_ci(points: list[list[float]]) -> tuple[float, float, float, int] | None:
    """(tok/s, low, high, batches) from cumulative (t, completions, out_tokens[, joules]) points,
    by batch means; None while the window is too short to say anything."""
    if len(points) < 3:
        return None
    t0, t1 = points[0][0], points[-1][0]
    span = t1 - t0
    if span <= 0:
        return None
    mean = (points[-1][2] - points[0][2]) / span
    k = min(MAX_BATCHES, (len(points) - 1) // 2)
    if k < 2:
        return mean, 0.0, math.inf, k
    rates = []
    j = 0
    prev_t, prev_tok = points[0][0], points[0][2]
    for b in range(1, k + 1):
        edge = t0 + span * b / k
        while j < len(points) - 1 and points[j][0] < edge:
            j += 1
        t, tok = points[j][0], points[j][2]
        if t > prev_t:
            rates.append((tok - prev_tok) / (t - prev_t))
            prev_t, prev_tok = t, tok
    n = len(rates)
    if n < 2:
        return mean, 0.0, math.inf, n
    m = sum(rates) / n
    sd = math.sqrt(sum((r - m) ** 2 for r in rates) / (n - 1))
    half = t975(n - 1) * sd / math.sqrt(n)
    return mean, max(0.0, mean - half), mean + half, n


def reading_s(time_scale: float) -> float:
    """Wall seconds between a trial's progress readings: READING_S of the server's time, like
    MIN_WINDOW_S, so the 6 batches (13 readings) are 3 s of the server's time and not 3 s of wall
    time on a simulator run faster than real (time scale 0.05: every 20 ms); a real server
    (scale 1) is read every 0.25 s, as before."""
    scale = max(0.0, float(time_scale))
    return min(READING_S, max(READING_MIN_S, READING_S * scale))


def new_trial(
    candidates: list[str],
    objective: str = "time",
    cap_requests: int = DEFAULT_CAP_REQUESTS,
    cap_minutes: float = DEFAULT_CAP_MINUTES,
    replan: bool = False,
) -> dict:
    """The persisted state of a --choose job (the `choose` key of its record)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"--objective must be time or energy, not {objective!r}")
    if cap_requests < 1:
        raise ValueError("the trial's request cap must be at least 1")
    if cap_minutes <= 0:
        raise ValueError("the trial's minute cap must be more than 0")
    return {
        "objective": objective,
        "cap_requests": int(cap_requests),
        "cap_minutes": float(cap_minutes),
        "replan": bool(replan),
        "phase": "trial" if len(candidates) > 1 else "decided",
        "round": 1,
        "current": None,  # the candidate being measured
        "winner": candidates[0] if len(candidates) == 1 else None,
        "note": "one candidate: no trial" if len(candidates) == 1 else None,
        "watch": None,
        "candidates": [_candidate(n) for n in candidates],
    }


def _candidate(name: str) -> dict:
    return {
        "name": name,
        "state": "pending",  # pending | swapping | measuring | measured | skipped
        "reason": None,  # why skipped, or why the trial stopped (interval, cap)
        "swap_s": None,  # the swap to it, measured during the trial (0: it already ran)
        "swap_j": None,
        "requests": 0,  # answers written while it was measured (kept: real work)
        "out_tokens": 0,
        "joules": 0.0,
        "tok_s": None,
        "ci_low": None,
        "ci_high": None,
        "batches": 0,
        "projected_s": None,
        "projected_j": None,
        "started": None,  # wall time the measurement began (for the minute cap)
        "base": None,  # (completions, out_tokens, joules) of the job when it began measuring
        "points": [],  # (t, completions, out_tokens, joules) since it began, measured window
        "warm_until": None,  # completions (job total) the warm-up ends at
        "cold_until": None,  # ... its prefix cache's warm-up (the first window's cold part)
    }


def get(trial: dict, name: str) -> dict:
    return next(c for c in trial["candidates"] if c["name"] == name)


def next_candidate(trial: dict, running: str | None) -> dict | None:
    """The next candidate to measure: the one the slot runs first (no swap), then in order."""
    pending = [c for c in trial["candidates"] if c["state"] in ("pending", "swapping")]
    if not pending:
        return None
    for c in pending:
        if c["name"] == running:
            return c
    return pending[0]


def skip(trial: dict, name: str, reason: str) -> None:
    c = get(trial, name)
    c["state"], c["reason"] = "skipped", reason


def begin(
    c: dict,
    completions: int,
    out_tokens: int,
    joules: float,
    concurrency: int,
    time_scale: float = 1.0,
    answered_here: int = 0,
) -> None:
    """The candidate's server is ready and the job sends to it: the measurement starts once the
    first wave (`concurrency` answers) is in, so ramp-up is not counted as its speed, and on its
    first window is cold until its prefix cache is warm (`warmup` answers, less the
    `answered_here` the job already had from this server: they warmed it too)."""
    c["state"] = "measuring"
    c["started"] = c["started"] or time.time()
    # A new server's prefix cache starts empty: its first window measures it cold until the
    # cache is warm for the job's shared prefixes (`warmup` requests, from --choose auto's
    # advice), then starts again (observe); while cold, its rate is a low estimate (enough).
    # The serving profile answered the job before the trial began: those prompts are cached.
    warmup = int(c.get("warmup") or 0) - max(0, int(answered_here))
    cache = max(0, warmup) if c["base"] is None else 0
    c["base"] = c["base"] or [completions, out_tokens, joules]
    wave = max(1, concurrency)
    c["warm_until"] = completions + wave
    c["cold_until"] = completions + cache if cache > wave else None
    c["warm_first"] = None  # the runner's pass on this server, once it ended (warm_first)
    c["points"] = []  # a resumed measurement starts a new window (the old one's clock is gone)
    c["concurrency"] = concurrency
    c["time_scale"] = time_scale  # MIN_WINDOW_S is the server's time: wall = server x this


def warm_first(c: dict, report: dict | None, launch: str | None, completions: int) -> None:
    """The runner's warm-first pass on this candidate's server (jobs/warm_first.py: one request
    per shared prefix first) replaces advise's estimate of its cache warm-up: the window is cold
    until the pass's requests are answered, then a wave (those sent while the pass ran did not
    find their prefixes cached yet). Taken once per window; a report of another server (the
    runner not yet told of this one) leaves advise's estimate in place."""
    if not report or launch is None or report.get("launch") != launch or c.get("warm_first"):
        return
    left, primed = int(report.get("left") or 0), int(report.get("primed") or 0)
    if primed == 0:
        return  # no pass on this server (a cache that holds part of the prefixes): advise's stays
    wave = max(1, int(c.get("concurrency") or 1))
    if left > 0:
        c["cold_until"] = completions + left + wave  # in place of advise's estimate
        return
    c["warm_first"] = {"primed": primed, "at": completions}
    # ended before this reading: warm after the wave that began the window (begin's warm_until)
    cold = c.get("cold_until")
    c["cold_until"] = None if cold is None else min(int(cold), completions + wave)


def prime_most(trial: dict | None, profile: str | None) -> int | None:
    """What bounds a warm-first pass on `profile`'s new server: its cache warm-up where advise
    said one (`warmup`: the requests its cache remembers; under the shared prefixes, a cache that
    holds part of them, and the runner makes no pass: jobs/warm_first.py). None: no bound."""
    if not trial or profile is None:
        return None
    for c in trial.get("candidates") or []:
        if c.get("name") == profile and c.get("warmup"):
            return int(c["warmup"])
    return None


def count(c: dict, completions: int, out_tokens: int, joules: float) -> None:
    """What `c` used so far: the job's counters since it began (a restarted agent's first
    readings included: the output file, not the agent, holds what was written)."""
    base = c["base"] or [completions, out_tokens, joules]
    c["requests"] = max(c["requests"], completions - int(base[0]))
    c["out_tokens"] = max(c["out_tokens"], out_tokens - int(base[1]))
    c["joules"] = max(c["joules"], joules - float(base[2]))


def observe(c: dict, t: float, completions: int, out_tokens: int, joules: float) -> None:
    """A progress reading of the job while `c` is measured."""
    count(c, completions, out_tokens, joules)
    if c["warm_until"] is not None and completions < c["warm_until"]:
        return
    pts = c["points"]
    if c.get("cold_until") is not None and completions >= c["cold_until"]:
        # the prefix cache is warm: the window starts again without the cold readings (their
        # figures stay shown until the warm window has its own)
        c["cold_until"] = None
        pts.clear()
    scale = 1.0 if c.get("time_scale") is None else float(c["time_scale"])
    if pts and completions == pts[-1][1] and t - pts[-1][0] < reading_s(scale):
        return
    pts.append([round(t, 3), completions, out_tokens, round(joules, 1)])
    if len(pts) > MAX_POINTS:
        del pts[1:-1:2]  # thin evenly; the window's ends stay
    est = rate_ci(pts)
    if est is not None:
        c["tok_s"], c["ci_low"], c["ci_high"], c["batches"] = (
            round(est[0], 2),
            round(est[1], 2),
            round(est[2], 2) if math.isfinite(est[2]) else None,
            est[3],
        )


def enough(c: dict, trial: dict) -> str | None:
    """Why the measurement of `c` may stop now (None: go on)."""
    if c["requests"] >= trial["cap_requests"]:
        return f"request cap ({trial['cap_requests']:,})"
    if c["started"] and time.time() - c["started"] >= trial["cap_minutes"] * 60:
        return f"time cap ({trial['cap_minutes']:g} min)"
    pts = c["points"]
    if len(pts) < 3 or c["tok_s"] is None or c["ci_high"] is None:
        return None
    span = pts[-1][0] - pts[0][0]
    measured = pts[-1][1] - pts[0][1]
    # the minimum window is the server's time: the simulator run faster than real time (a
    # bench at time scale 0.05) measures the same server seconds in less wall time
    scale = 1.0 if c.get("time_scale") is None else max(0.0, float(c["time_scale"]))
    if span < MIN_WINDOW_S * scale or c["batches"] < MIN_BATCHES:
        return None
    if measured < 2 * max(1, int(c.get("concurrency") or 1)):
        return None
    if c.get("cold_until") is not None:
        # Measured while its prefix cache still warms: the rate climbs as the cache fills, so
        # the window's rate is under the warm one and its batch-means interval is wider (the
        # climb counts as noise). Where it clears the rest by the difference's interval, the
        # warm server does too: it may end the trial on `c`, never stop it as slower, as a
        # leader (a reference for later ones) or at +-5%.
        won = clear_winner(c, trial) or clear_best(c, trial)
        return f"{won}; {COLD}" if won else None
    early = (
        clear_loser(c, trial)
        or clear_winner(c, trial)
        or clear_best(c, trial)
        or clear_leader(c, trial)
    )
    if early:
        return early
    tok_s = c["tok_s"]
    target, why = CI_TARGET, ""
    ahead = _far_ahead(c, trial)
    if ahead is not None:
        target, why = CI_WIDE, f" ({ahead} left is expected x{FAR_AHEAD:g} or more of it)"
    if tok_s > 0 and (c["ci_high"] - c["ci_low"]) / 2 <= target * tok_s:
        return f"95% interval within +-{target:.0%}{why}"
    return None


def _far_ahead(c: dict, trial: dict) -> str | None:
    """The candidate still to measure that advise expects FAR_AHEAD x or more of `c` (gains),
    or None: `c` is then measured to +-CI_WIDE only. Its figure is a reference the one expected
    far ahead is compared with by the difference's interval (valid at 95% whatever its width),
    not the one the job will run on; where advise was wrong, the rest are compared with its
    wider interval, and a close call is ranked on rates known to +-10%."""
    gain = c.get("gain")
    if not gain or trial.get("objective") != "time":
        return None
    left = [
        o
        for o in trial["candidates"]
        if o is not c and o["state"] in ("pending", "swapping") and o.get("gain")
    ]
    best = max(left, key=lambda o: float(o["gain"]), default=None)
    if best is None or float(best["gain"]) < FAR_AHEAD * float(gain):
        return None
    return str(best["name"])


def clear_loser(c: dict, trial: dict) -> str | None:
    """The sequential stop: `c`'s 95% interval lies wholly below the leader's (the measured
    candidate with the best rate), so it stops being measured (why, naming both figures), or
    None. Its true rate can beat the leader's only if one of the two intervals misses its own
    true rate: at most 2.5% + 2.5% = 5% for one look (docs/jobs.md gives the rate measured with
    the repeated looks of a trial)."""
    hi = c.get("ci_high")
    if hi is None:
        return None
    rivals = [
        o
        for o in trial["candidates"]
        if o is not c and o["state"] == "measured" and o["tok_s"] and o["ci_low"] is not None
    ]
    leader = max(rivals, key=lambda o: o["tok_s"], default=None)
    if leader is None or hi >= leader["ci_low"]:
        return None
    return (
        f"stopped early: at most {hi:,.0f} tok/s, under {leader['name']}'s at least "
        f"{leader['ci_low']:,.0f} (95% intervals apart)"
    )


def clear_winner(c: dict, trial: dict) -> str | None:
    """The sequential stop the other way: `c` is the last candidate left to measure and it is
    faster than every other measured candidate by more than the 95% interval of the difference
    (its rate minus theirs, half-widths combined in quadrature: sqrt(h_c^2 + h_o^2)), so the
    trial ends on it at once (why, naming both figures), or None. The decision needs which one
    is faster, not each rate to +-5%: the difference's interval answers that, and it clears a
    rival measured briefly (a leader so far, wide) sooner than two whole intervals apart would
    (h_c + h_o). A wrong stop needs the difference's interval to miss the true difference: 2.5%
    for one look (one-sided); docs/jobs.md gives the rate measured with the repeated looks of a
    trial (bench/bench_sequential_stop.py). Only for the time objective: the fastest is not
    always the one that spends the fewest joules."""
    lo, hi, rate = c.get("ci_low"), c.get("ci_high"), c.get("tok_s")
    if lo is None or hi is None or not rate or trial.get("objective") != "time":
        return None
    others = [o for o in trial["candidates"] if o is not c]
    if any(o["state"] in ("pending", "swapping", "measuring") for o in others):
        return None  # a candidate not measured yet could still beat it
    rivals = [o for o in others if o["state"] == "measured" and o["tok_s"]]
    if not rivals or any(o["ci_high"] is None or o["ci_low"] is None for o in rivals):
        return None  # a rival without an interval cannot be told apart
    lead = _lead(c, rivals)
    if lead is None:
        return None
    margin, top = lead
    return (
        f"stopped early: at least {margin:,.0f} tok/s over {top['name']}'s {top['tok_s']:,.0f} "
        f"(the difference's 95% interval above zero, nothing left to measure)"
    )


def _lead(c: dict, rivals: list[dict]) -> tuple[float, dict] | None:
    """`c`'s smallest lead over `rivals` beyond the difference's widened 95% interval
    (its rate minus theirs, half-widths in quadrature, x DIFF_WIDEN) and the rival it is
    smallest over, or None where it does not clear every one of them."""
    half_c = (float(c["ci_high"]) - float(c["ci_low"])) / 2
    worst: tuple[float, dict] | None = None
    for o in rivals:
        half_o = (float(o["ci_high"]) - float(o["ci_low"])) / 2
        margin = float(c["tok_s"]) - float(o["tok_s"]) - DIFF_WIDEN * math.hypot(half_c, half_o)
        if margin <= 0:
            return None
        if worst is None or margin < worst[0]:
            worst = (margin, o)
    return worst


CLEAR_BEST = "stopped early: best, at least"
COLD = "measured while its prefix cache warmed (a low estimate)"


def clear_best(c: dict, trial: dict) -> str | None:
    """The winner's stop before the last candidate: `c` clears every measured candidate by the
    difference's rule (clear_winner's), and advise expects every candidate not measured yet to
    be slower than `c` measured: each one's expected gain (`gain`, advise's factor over the
    serving profile) is under `c`'s, and its expected rate (a measured candidate's rate x the
    ratio of their gains, the highest of those) under `c`'s lower bound. The trial ends on `c`
    (the ones left are skipped, `skip_rest`), or None. The error it adds is advise's, not the
    statistics': a candidate left unmeasured that would have been faster than advise expects
    (bench/bench_sequential_stop.py measures how often that picks the wrong one). Only for the
    time objective, and only where every candidate left has an expected gain."""
    lo, hi, rate, gain = c.get("ci_low"), c.get("ci_high"), c.get("tok_s"), c.get("gain")
    if lo is None or hi is None or not rate or gain is None or trial.get("objective") != "time":
        return None
    others = [o for o in trial["candidates"] if o is not c]
    left = [o for o in others if o["state"] in ("pending", "swapping")]
    if not left or any(o["state"] == "measuring" for o in others):
        return None  # none left: clear_winner's case
    rivals = [o for o in others if o["state"] == "measured" and o["tok_s"]]
    if not rivals or any(o["ci_high"] is None or o["ci_low"] is None for o in rivals):
        return None
    refs = [o for o in [*rivals, c] if o.get("gain")]
    expect = 0.0
    for o in left:
        if o.get("gain") is None or float(o["gain"]) >= float(gain):
            return None  # advise expects as much of it, or says nothing: it is measured
        expect = max(
            expect, *(float(r["tok_s"]) * float(o["gain"]) / float(r["gain"]) for r in refs)
        )
    if expect >= float(lo):
        return None
    lead = _lead(c, rivals)
    if lead is None:
        return None
    margin, top = lead
    return (
        f"{CLEAR_BEST} {margin:,.0f} tok/s over {top['name']}'s {top['tok_s']:,.0f} (the "
        f"difference's 95% interval above zero); the {len(left)} left expected at most "
        f"{expect:,.0f} (advise's gain), under its {float(lo):,.0f}"
    )


def skip_rest(trial: dict, c: dict) -> None:
    """After `clear_best` ended the trial on `c`: the candidates not measured are skipped, each
    with advise's expected gain beside `c`'s (the report and the decision say why)."""
    for o in trial["candidates"]:
        if o is not c and o["state"] in ("pending", "swapping"):
            o["state"] = "skipped"
            o["reason"] = (
                f"not measured: advise expects x{float(o.get('gain') or 0):.2f} of it, "
                f"{c['name']} (x{float(c.get('gain') or 0):.2f}) measured clearly best"
            )


def clear_leader(c: dict, trial: dict) -> str | None:
    """The sequential stop for a candidate that is not the last: its 95% interval lies wholly
    above every measured one's, so it leads so far and its measurement stops (why), or None.
    Nothing is decided by it: a later candidate is compared with its (wider) interval by the
    two rules above, and a close call is ranked on the rates measured. Only for the time
    objective, and not where advise expects less of every one left (clear_best's case: a
    leader's stop there would measure the rest where a little more of `c` ends the trial;
    progress read at the server's pace looks at the window's first, widest interval).
    bench/bench_sequential_stop.py measures the whole trial's wrong picks with it."""
    lo = c.get("ci_low")
    if lo is None or c.get("ci_high") is None or trial.get("objective") != "time":
        return None
    others = [o for o in trial["candidates"] if o is not c]
    if _best_expected(c, others):
        return None  # clear_best may end the trial on it: measured until it does, or to its CI
    left = sum(1 for o in others if o["state"] in ("pending", "swapping"))
    rivals = [o for o in others if o["state"] == "measured" and o["tok_s"]]
    if not left or not rivals or any(o["ci_high"] is None for o in rivals):
        return None
    top = max(rivals, key=lambda o: float(o["ci_high"]))
    if lo <= top["ci_high"]:
        return None
    return (
        f"stopped early: leads so far, at least {lo:,.0f} tok/s over {top['name']}'s at most "
        f"{top['ci_high']:,.0f} (95% intervals apart; {left} still to measure)"
    )


def _best_expected(c: dict, others: list[dict]) -> bool:
    """Advise expects less of every candidate still to measure than of `c` (each one's gain
    under `c`'s): clear_best may end the trial on `c`, so it is not stopped as a mere leader
    (which would measure the rest), only when clearly best or at its interval."""
    gain = c.get("gain")
    left = [o for o in others if o["state"] in ("pending", "swapping")]
    if gain is None or not left:
        return False
    return all(o.get("gain") is not None and float(o["gain"]) < float(gain) for o in left)


def finish(c: dict, reason: str) -> None:
    if not c["tok_s"]:
        # a cap (or the job's end) before any rate was measured: not a figure to decide on
        c["state"] = "skipped"
        c["reason"] = (
            f"not measured: {reason} before a rate could be measured "
            f"({int(c.get('requests') or 0):,} answers, all in its warm-up)"
        )
    else:
        c["state"], c["reason"] = "measured", reason
    c["points"] = c["points"][-1:] if c["points"] else []  # the record keeps the figures only


def project(
    trial: dict, remaining: int, mean_out: float, running: str | None, power_w: float | None
) -> None:
    """Each measured candidate's projected finish (seconds) and energy (joules) for the rest."""
    tokens = max(0, remaining) * max(0.0, mean_out)
    # The candidate the slot ran before the trial cost no swap then, but going back to it does:
    # its swap is taken as the mean of the swaps measured to the others.
    swaps = [c for c in trial["candidates"] if c["swap_s"]]
    typical_s = sum(float(c["swap_s"]) for c in swaps) / len(swaps) if swaps else 0.0
    typical_j = sum(float(c["swap_j"] or 0.0) for c in swaps) / len(swaps) if swaps else 0.0
    for c in trial["candidates"]:
        if c["state"] != "measured" or not c["tok_s"]:
            c["projected_s"] = c["projected_j"] = None
            continue
        swap_s = 0.0 if c["name"] == running else float(c["swap_s"] or typical_s)
        c["projected_s"] = round(tokens / c["tok_s"] + swap_s, 1)
        j_tok = c["joules"] / c["out_tokens"] if c["out_tokens"] and c["joules"] else None
        if j_tok is not None:
            swap_j = 0.0 if c["name"] == running else float(c["swap_j"] or typical_j)
            c["projected_j"] = round(tokens * j_tok + swap_j, 1)
        elif power_w:
            c["projected_j"] = round(c["projected_s"] * power_w, 1)
        else:
            c["projected_j"] = None


def decide(trial: dict, note: str | None = None) -> str | None:
    """The winner: the soonest projected finish (or the fewest joules; a candidate without an
    energy figure ranks after those with one). None when nothing was measured."""
    measured = [c for c in trial["candidates"] if c["state"] == "measured" and c["tok_s"]]
    # A candidate without a measurement is never a winner; the decision says which and why.
    missing = [
        f"{c['name']} ({c.get('reason') or c['state']})"
        for c in trial["candidates"]
        if c not in measured
    ]
    lacking = "no measurement for " + ", ".join(missing) if missing else None
    if not measured:
        trial["phase"], trial["winner"] = "decided", None
        trial["note"] = "; ".join(
            x for x in (note or "no candidate could be measured", lacking) if x
        )
        return None
    if trial["objective"] == "energy":
        # energy measured while it ran (joules for its tokens) ranks before a mere estimate
        unmetered = [c["name"] for c in measured if not (c["joules"] and c["out_tokens"])]
        if unmetered:
            lacking = "; ".join(
                x
                for x in (lacking, f"no energy measured for {', '.join(unmetered)}: ranked last")
                if x
            )

        def key(c: dict) -> tuple:
            j = c["projected_j"]
            metered = bool(c["joules"] and c["out_tokens"])
            return (not metered, j is None, j if j is not None else 0.0, c["projected_s"] or 0.0)
    else:

        def key(c: dict) -> tuple:
            return (c["projected_s"] if c["projected_s"] is not None else math.inf,)

    winner = min(measured, key=key)
    note = "; ".join(x for x in (note, lacking) if x) or None
    trial["phase"], trial["winner"], trial["note"] = "decided", winner["name"], note
    trial["decided_at"] = time.time()
    trial["projected_tok_s"] = winner["tok_s"]
    trial["watch"] = None
    return winner["name"]


class Segment(Protocol):
    """What `view` and the trial read of a job's segment (agent/jobs/records.py
    SegmentRecord)."""

    @property
    def profile(self) -> str | None: ...
    @property
    def info_hash(self) -> str | None: ...
    @property
    def launch_id(self) -> str | None: ...
    @property
    def completions(self) -> int: ...


def view(trial: dict, segments: Sequence[Segment] | None = None) -> dict:
    """What status, the Jobs pane and the decision event show (the points left out). With the
    job's `segments`: each candidate carries the hash of what its server ran (info_hash)."""
    hashes = {s.profile: s.info_hash for s in segments or () if s.info_hash}
    keep = (
        "name",
        "state",
        "reason",
        "requests",
        "out_tokens",
        "tok_s",
        "ci_low",
        "ci_high",
        "swap_s",
        "projected_s",
        "joules",
        "projected_j",
        "delta",
        "gain",
        "warm_first",
    )
    cands = []
    for c in trial["candidates"]:
        row: dict[str, Any] = {k: c.get(k) for k in keep}
        row["joules"] = round(float(c.get("joules") or 0.0), 1)
        reqs = int(c.get("requests") or 0)
        toks = int(c.get("out_tokens") or 0)
        j = row["joules"]
        row["j_per_completion"] = round(j / reqs, 2) if reqs and j else None
        row["tok_per_j"] = round(toks / j, 3) if toks and j else None
        row["info_hash"] = hashes.get(c.get("name"))
        cands.append(row)
    return {
        "winner": trial.get("winner"),
        "phase": trial.get("phase"),
        "objective": trial.get("objective"),
        "round": trial.get("round", 1),
        "current": trial.get("current"),
        "note": trial.get("note"),
        "watch": trial.get("watch"),
        "candidates": cands,
        "advice": trial.get("advice") or [],
    }


def restart(trial: dict, running: str | None) -> None:
    """--replan: run the trial again on the remaining work (skipped candidates stay skipped)."""
    trial["round"] = int(trial.get("round", 1)) + 1
    trial["phase"], trial["winner"], trial["watch"] = "trial", None, None
    trial["current"] = None
    for c in trial["candidates"]:
        if c["state"] == "skipped":
            continue
        fresh = _candidate(c["name"])
        fresh["swap_s"], fresh["swap_j"] = c["swap_s"], c["swap_j"]  # known: kept for projections
        for kept in ("delta", "gain", "warmup"):
            if kept in c:
                fresh[kept] = c[kept]
        c.clear()
        c.update(fresh)


class Watch:
    """The measured rate against the projection: `update` returns a message once the rate has
    stayed more than WATCH_BELOW under the projection for WATCH_FOR_S (and None otherwise)."""

    def __init__(self, projected_tok_s: float, for_s: float = WATCH_FOR_S) -> None:
        self.projected = projected_tok_s
        self.for_s = for_s
        self.below_since: float | None = None

    def update(self, t: float, tok_s: float) -> str | None:
        if tok_s <= 0 or self.projected <= 0:
            return None  # no rate (held for a swap, paused): says nothing about the server
        if tok_s >= (1.0 - WATCH_BELOW) * self.projected:
            self.below_since = None
            return None
        if self.below_since is None:
            self.below_since = t
        if t - self.below_since >= self.for_s:
            pct = 100.0 * (1.0 - tok_s / self.projected)
            return (
                f"{tok_s:,.0f} tok/s is {pct:.0f}% below the projected {self.projected:,.0f} "
                f"for {self.for_s / 60:g} min"
            )
        return None
