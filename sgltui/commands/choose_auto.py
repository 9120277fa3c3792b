"""`job run --choose auto`: the trial's candidates are the serving profile and the best of
`sgltui advise`'s proposals (at most --choose-max). Worked out here, before the job is sent:
each proposal is written as a profile that extends the serving one (choosing `auto` is
accepting them for the trial; they stay in the profile folder, named by their delta), and the
agent gets the candidates as `--choose A,B,C` would give them, with each one's delta for
`job status` to show."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sgltui.commands import CliError
from sgltui.commands.advise import advise_for
from sgltui.core import advice, locations

DEFAULT_MAX = 3
SAMPLE_LINES = 1000  # the input's first lines give the job's lengths (the rest is the agent's)
CHARS_PER_TOKEN = 4.0  # a prompt's length before any answer says its tokens


def input_lengths(path: Path) -> tuple[float | None, float | None]:
    """(mean prompt tokens, mean max output tokens) of the first lines of a batch input, as a
    first guess of the job's lengths: prompt characters / 4, the bodies' max_tokens."""
    prompts: list[float] = []
    outputs: list[float] = []
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for i, line in enumerate(fh):
                if i >= SAMPLE_LINES:
                    break
                try:
                    body = json.loads(line).get("body") or {}
                except (ValueError, AttributeError):
                    continue
                if not isinstance(body, dict):
                    continue
                text = body.get("prompt") or body.get("messages") or ""
                prompts.append(len(json.dumps(text)) / CHARS_PER_TOKEN)
                limit = body.get("max_tokens") or body.get("max_completion_tokens")
                if isinstance(limit, int) and limit > 0:
                    outputs.append(float(limit))
    except OSError:
        return None, None
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return mean(prompts), mean(outputs)


def resolve(
    args: argparse.Namespace,
) -> tuple[str, dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """('serving,p1,p2', {name: delta}, every proposal with the bound it answers) for the slot
    the job goes to."""
    if getattr(args, "pool", None):
        raise CliError(
            "--choose auto advises one slot's profile; give --slot, or name the profiles"
        )
    limit = DEFAULT_MAX if args.choose_max is None else args.choose_max
    if limit < 0:
        raise CliError("--choose-max must be 0 or more")
    prompt, output = input_lengths(Path(args.target).expanduser())
    result, serving = advise_for(
        args, args.slot, None, {"prompt_tokens": prompt, "output_tokens": output}
    )
    chosen = result.proposals[:limit]
    folder = locations.config_dir() / "profiles"
    for p in chosen:
        advice.write_accepted(serving.name, p, folder)
    names = [serving.name, *(p.name for p in chosen)]
    deltas: dict[str, dict[str, Any]] = {serving.name: {}}
    deltas.update({p.name: dict(p.delta) for p in chosen})
    every = [{**p.as_json(), "bound": result.bound} for p in result.proposals]
    return ",".join(names), deltas, every
