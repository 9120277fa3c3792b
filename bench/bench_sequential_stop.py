#!/usr/bin/env python3
"""The sequential stops' error rates (jobs/choose.py `clear_loser`, `clear_winner`), measured
with the trial's own code on synthetic progress, not derived.

Each trial: a rival is measured first to its +-5% interval (progress every 0.25 s, output tok/s
with uniform noise of +-NOISE per tick, the trial's batch means), then the candidate under test
is fed tick by tick, with `choose.enough` asked after every tick as the agent does, until it
says stop. Its rate is the rival's x (1 + DELTA).

- loser rule (the candidate is measured after the leader, other candidates may follow): a
  wrong stop is "stopped early" as a loser while DELTA > 0 (it is truly faster);
- winner rule (the candidate is the last to measure): a wrong stop is "stopped early" as the
  winner while DELTA < 0 (it is truly slower).
For DELTA on the right side the same count is the power (how often the stop saves time), and
the mean measured seconds against the +-5% rule's say how much.

    python bench/bench_sequential_stop.py [--trials 2000] [--noise 0.3] [--time-scale 1]

Exit 0 whatever the figures: they are the output.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sgltui.jobs import choose  # noqa: E402

# The trial reads the job every choose.reading_s(SCALE) of wall time: 0.25 s on a real server
# (jobs/runner.py PROGRESS_S); --time-scale, a simulator's (wall seconds per server second):
# 0.25 s of the server's time, 20 ms of wall time at least; the seconds printed are the server's
SCALE = 1.0
TOKENS_PER_COMPLETION = 16
CONCURRENCY = 4
MAX_S = 600.0


def _feed_until_stop(c: dict, trial: dict, rate: float, noise: float, rnd: random.Random):
    """Tick until `choose.enough` says stop: (why, measured seconds)."""
    toks = 0.0
    choose.begin(c, 0, 0, 0.0, concurrency=CONCURRENCY, time_scale=SCALE)
    tick = choose.reading_s(SCALE)
    t = 0.0
    while t < MAX_S * SCALE:
        t += tick
        toks += max(0.0, rate / SCALE * tick * (1 + rnd.uniform(-noise, noise)))
        choose.observe(c, t, int(toks // TOKENS_PER_COMPLETION), int(toks), 0.0)
        why = choose.enough(c, trial)
        if why is not None:
            return why, t / SCALE
    return "cap", t / SCALE


def one(rule: str, delta: float, noise: float, rnd: random.Random) -> tuple[str, float]:
    """One trial of `rule` ("loser" or "winner"): (why the candidate stopped, its seconds)."""
    # the loser rule may stop a candidate while others wait; the winner rule only the last one
    names = ["rival", "cand", "later"] if rule == "loser" else ["rival", "cand"]
    trial = choose.new_trial(names, cap_requests=10**9, cap_minutes=1e9)
    rival = choose.get(trial, "rival")
    why, _ = _feed_until_stop(rival, trial, 1000.0, noise, rnd)
    choose.finish(rival, why)
    cand = choose.get(trial, "cand")
    why, seconds = _feed_until_stop(cand, trial, 1000.0 * (1 + delta), noise, rnd)
    return why, seconds


def rates(rule: str, delta: float, trials: int, noise: float, seed: int = 1) -> dict:
    """{'early': share stopped early, 'early_s': mean seconds of those, 'tight_s': mean seconds
    of those measured to the +-5% interval}."""
    rnd = random.Random(seed)
    early, early_s, tight_s = 0, 0.0, []
    # the loser stop says "at most" (its upper bound), the winner stop "at least" (its lower)
    mark = "stopped early: at most" if rule == "loser" else "stopped early: at least"
    for _ in range(trials):
        why, s = one(rule, delta, noise, rnd)
        if why.startswith(mark):
            early += 1
            early_s += s
        else:
            tight_s.append(s)
    return {
        "early": early / trials,
        "early_s": early_s / early if early else None,
        "tight_s": sum(tight_s) / len(tight_s) if tight_s else None,
    }


def whole(
    true: tuple[float, ...],
    trials: int,
    noise: float,
    seed: int = 7,
    gains: tuple[float, ...] | None = None,
) -> dict:
    """Whole trials over candidates of `true` tok/s, measured in order with every stop rule,
    then decided as the trial does (the soonest projected finish: here the best measured rate,
    the same work left, no swaps): {'wrong': share of trials that picked a candidate slower
    than the best, 'loss': its mean true shortfall, 's': mean seconds measured in all}. With
    `gains` (advise's expected factor of each), a clearly best candidate that is not the last
    may end the trial (clear_best) and the rest are not measured."""
    rnd = random.Random(seed)
    wrong, loss, secs = 0, 0.0, 0.0
    names = [f"c{i}" for i in range(len(true))]
    for _ in range(trials):
        trial = choose.new_trial(names, cap_requests=10**9, cap_minutes=1e9)
        for name, g in zip(names, gains or (), strict=False):
            choose.get(trial, name)["gain"] = g
        for name, rate in zip(names, true, strict=True):
            c = choose.get(trial, name)
            if c["state"] == "skipped":
                continue
            why, s = _feed_until_stop(c, trial, rate, noise, rnd)
            choose.finish(c, why)
            if why.startswith(choose.CLEAR_BEST):
                choose.skip_rest(trial, c)
            secs += s
        choose.project(trial, remaining=10_000, mean_out=16.0, running=None, power_w=None)
        picked = true[names.index(choose.decide(trial) or names[0])]
        if picked < max(true):
            wrong += 1
            loss += 1 - picked / max(true)
    return {"wrong": wrong / trials, "loss": loss / trials, "s": secs / trials}


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--noise", type=float, default=0.3)
    p.add_argument("--time-scale", type=float, default=1.0)
    args = p.parse_args()
    global SCALE
    SCALE = args.time_scale
    budget = 0.05  # one look, two intervals: at most 2.5% + 2.5%
    tick = choose.reading_s(SCALE)
    print(f"{args.trials:,} trials each, +-{args.noise:.0%} noise per {tick:g} s tick (time "
          f"scale {SCALE:g}: {tick / SCALE:g} s of the server's time)")  # fmt: skip
    for rule, wrong_side, deltas in (
        ("loser", 1, (0.02, 0.05, 0.0, -0.10, -0.20)),
        ("winner", -1, (-0.02, -0.05, 0.0, 0.10, 0.20)),
    ):
        print(f"{rule} rule (candidate's true rate vs the rival's):")
        for d in deltas:
            r = rates(rule, d, args.trials, args.noise)
            where = f"{d:+.0%}"
            es = f", {r['early_s']:.1f} s" if r["early_s"] else ""
            ts = f" (to +-5%: {r['tight_s']:.1f} s)" if r["tight_s"] else ""
            if d * wrong_side > 0:
                verdict = "met" if r["early"] <= budget else "OVER"
                print(f"  {where}: wrong stop {r['early']:.2%} (budget {budget:.0%}: {verdict})")
            elif d == 0:
                print(f"  {where}: stopped early {r['early']:.2%} (equal: a stop costs nothing)")
            else:
                print(f"  {where}: stopped early {r['early']:.2%}{es}{ts}")
    print("whole trials of three (1,000 tok/s, 1,150, then the last), the last's rate vs the")
    print("middle's: wrong picks / mean shortfall / seconds measured; with and without the stop")
    print("of a leader that is not the last (clear_leader):")
    keep = choose.clear_leader
    for d in (-0.05, -0.02, 0.02, 0.05, 0.5):
        true = (1000.0, 1150.0, 1150.0 * (1 + d))
        row = []
        for on in (True, False):
            choose.clear_leader = keep if on else (lambda c, trial: None)
            w = whole(true, max(1, args.trials // 4), args.noise)
            row.append(f"{w['wrong']:.2%} / {w['loss']:.2%} / {w['s']:.1f} s")
        choose.clear_leader = keep
        print(f"  last {d:+.0%}: with {row[0]}; without {row[1]}")
    print("--choose auto's order (the serving profile x1, advise's best-expected x1.86 second,")
    print("the other x1.18 last), the last one's true rate vs what advise expects of it: wrong")
    print("picks / mean shortfall / seconds measured; with and without the end on a clear best")
    print("before the last (clear_best: its added error is advise's, a candidate left unmeasured")
    print("that is faster than expected):")
    keep_best = choose.clear_best
    gains = (1.0, 1.86, 1.18)
    for last in (1180.0, 1500.0, 1800.0, 1900.0, 2200.0):
        true = (1000.0, 1860.0, last)
        row = []
        for on in (True, False):
            choose.clear_best = keep_best if on else (lambda c, trial: None)
            w = whole(true, max(1, args.trials // 4), args.noise, gains=gains)
            row.append(f"{w['wrong']:.2%} / {w['loss']:.2%} / {w['s']:.1f} s")
        choose.clear_best = keep_best
        print(f"  last {last:,.0f} tok/s (expected 1,180): with {row[0]}; without {row[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
