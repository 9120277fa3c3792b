"""Start-up phases of an SGLang server, read from its log lines.

The phase order is fixed; a line can only move a launch forward, because TP ranks print the
same start-up lines at slightly different times and a late rank must not rewind the phase the
operator sees. The one step back is a draft model's weights loading after the target's.
"""

from __future__ import annotations

import re

SPAWNED = "spawned"
LOADING_WEIGHTS = "loading weights"
ALLOCATING_KV = "allocating KV cache"
CAPTURING_GRAPHS = "capturing CUDA graphs"
WARMING_UP = "warming up"

PHASES: tuple[str, ...] = (SPAWNED, LOADING_WEIGHTS, ALLOCATING_KV, CAPTURING_GRAPHS, WARMING_UP)

# Share of a typical start-up spent in each phase; used for progress until this profile has
# launched once and its own durations are known (weights dominate on a real GPU host).
DEFAULT_SHARE = {
    SPAWNED: 0.10,
    LOADING_WEIGHTS: 0.50,
    ALLOCATING_KV: 0.05,
    CAPTURING_GRAPHS: 0.25,
    WARMING_UP: 0.10,
}

READY_LINE = "The server is fired up and ready to roll!"

# (substring, phase entered). Matched on the message, so rank prefixes do not matter.
_MARKERS: tuple[tuple[str, str], ...] = (
    ("Load weight begin", LOADING_WEIGHTS),
    ("Load weight end", ALLOCATING_KV),  # SGLang prints nothing when KV allocation begins
    ("KV Cache is allocated", ALLOCATING_KV),
    ("Mamba Cache is allocated", ALLOCATING_KV),
    ("Memory pool end", ALLOCATING_KV),
    ("graph begin", CAPTURING_GRAPHS),  # 0.5.12 and 0.5.23 wordings both contain it
    ("max_total_num_tokens=", WARMING_UP),
    ("Engine startup timings", WARMING_UP),
    ("Uvicorn running on", WARMING_UP),
)

_UVICORN_RE = re.compile(r"Uvicorn running on (https?://\S+)")


def phase_of_line(line: str) -> str | None:
    """The phase a log line announces, or None for an ordinary line."""
    for needle, phase in _MARKERS:
        if needle in line:
            return phase
    return None


def is_ready_line(line: str) -> bool:
    return READY_LINE in line


def phase_index(phase: str | None) -> int:
    try:
        return PHASES.index(phase) if phase else -1
    except ValueError:
        return -1


def advance(current: str | None, line: str) -> str | None:
    """The phase after seeing `line` when in `current`; only ever moves forward."""
    new = phase_of_line(line)
    if new == LOADING_WEIGHTS and current == ALLOCATING_KV:
        return new  # a draft model (MTP/EAGLE) loads its weights right after the target's
    if new is None or phase_index(new) <= phase_index(current):
        return current
    return new


def estimate(
    phase: str | None, in_phase_s: float, done_s: dict[str, float], learned: dict[str, float] | None
) -> tuple[float, float | None]:
    """(progress 0..1, eta seconds or None) of a launch now in `phase` for `in_phase_s` seconds.

    `done_s` holds how long the finished phases of this launch took; `learned` the typical
    duration of each phase for this profile from earlier launches (None: never launched, so
    progress follows DEFAULT_SHARE and there is no ETA).
    """
    idx = max(phase_index(phase), 0)
    if learned:
        remaining_here = max(learned.get(PHASES[idx], 0.0) - in_phase_s, 0.0)
        eta = remaining_here + sum(learned.get(p, 0.0) for p in PHASES[idx + 1 :])
        elapsed = sum(done_s.values()) + in_phase_s
        total = elapsed + eta
        progress = elapsed / total if total > 0 else 0.0
        return min(progress, 0.99), eta
    before = sum(DEFAULT_SHARE[p] for p in PHASES[:idx])
    # Creep towards the end of the current phase without reaching it: no duration is known.
    share = DEFAULT_SHARE[PHASES[idx]] * (1.0 - 1.0 / (1.0 + in_phase_s / 30.0))
    return min(before + share, 0.99), None


def uvicorn_url(line: str) -> str | None:
    m = _UVICORN_RE.search(line)
    return m.group(1) if m else None


class Forward:
    """A launch's progress that never goes back. SGLang loads the draft model's weights and
    allocates its KV cache after the target's (loading weights, allocating KV cache, loading
    weights, ...), and the estimate of a phase entered again is lower: the CLI read
    `allocating KV cache 72%` then `loading weights 56%`. Progress holds until the estimate
    passes it; a new launch (another key) starts from 0."""

    def __init__(self) -> None:
        self.key: object = None
        self.floor = 0.0

    def __call__(self, key: object, progress: float) -> float:
        if key != self.key:
            self.key, self.floor = key, 0.0
        self.floor = max(self.floor, progress)
        return self.floor
