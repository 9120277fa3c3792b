"""`job run --choose auto`: the trial's candidates are the serving profile and the best of
`sgltui advise`'s proposals (at most --choose-max). Worked out here, before the job is sent:
each proposal is written as a profile that extends the serving one (choosing `auto` is
accepting them for the trial; they stay in the profile folder, named by their delta), and the
agent gets the candidates as `--choose A,B,C` would give them (the serving profile first, the
proposals in advise's order, so the one expected to win is measured second and ends the trial
where it is clearly best), with each one's delta and expected gain for `job status` to show."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sgltui.commands import CliError
from sgltui.commands.advise import advise_for
from sgltui.core import advice, job_input, locations

DEFAULT_MAX = 3


def resolve(
    args: argparse.Namespace,
) -> tuple[str, dict[str, dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """('serving,p1,p2', {name: delta}, every proposal with the bound it answers, {name: cache
    warm-up requests}) for the slot the job goes to."""
    if getattr(args, "pool", None):
        raise CliError(
            "--choose auto advises one slot's profile; give --slot, or name the profiles"
        )
    limit = DEFAULT_MAX if args.choose_max is None else args.choose_max
    if limit < 0:
        raise CliError("--choose-max must be 0 or more")
    # the job's lengths and shared prefixes, guessed from its input's first lines
    first = job_input.sample(Path(args.target).expanduser())
    result, serving = advise_for(
        args,
        args.slot,
        None,
        {
            "prompt_tokens": first.prompt_tokens,
            "output_tokens": first.output_tokens,
            "prefix": first.prefix,
        },
    )
    chosen = result.proposals[:limit]
    folder = locations.config_dir() / "profiles"
    for p in chosen:
        advice.write_accepted(serving.name, p, folder)
    # The serving profile first (it runs: no swap), then the best-expected proposal: where it
    # measures clearly best and advise expects less of the rest, the trial ends on it at once,
    # without a swap back or the others' swaps (jobs/choose.py clear_best); where advise was
    # wrong the rest are measured in advise's order, the last one ended on by clear_winner.
    names = [serving.name, *(p.name for p in chosen)]
    deltas: dict[str, dict[str, Any]] = {serving.name: {}}
    deltas.update({p.name: dict(p.delta) for p in chosen})
    every = [{**p.as_json(), "bound": result.bound} for p in result.proposals]
    # a new server's prefix cache is cold: each candidate is measured once it is warm for the
    # job's shared prefixes (none: the trial's own first wave)
    warm = {serving.name: result.serving_warmup}
    warm.update({p.name: p.warmup for p in chosen})
    return ",".join(names), deltas, every, warm
