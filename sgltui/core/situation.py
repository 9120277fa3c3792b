"""What the advice (core/advice.py) reads about a serving profile and a job: one dataclass, so
the advice and its gain model (core/advice_gain.py) share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sgltui.core.prefix_reuse import PrefixReuse


@dataclass
class Situation:
    """What the advice reads. Sizes in bytes, lengths in tokens; None: not known."""

    serving: str
    server: dict[str, Any]  # the serving profile's resolved [server] flags
    card: dict[str, Any] | None = None  # its capacity card (JSON values)
    engine: dict[str, Any] | None = None  # its latest live reading
    accept_by_c: dict[int, float] = field(default_factory=dict)  # accept length at concurrency
    host_free_bytes: float | None = None  # host RAM free after the standbys' pins
    gpu_total_bytes: float | None = None
    prompt_tokens: float | None = None  # the job's mean prompt length
    output_tokens: float | None = None  # the job's mean output length
    concurrency: int | None = None  # what the job runs at (or wants)
    prefix: PrefixReuse | None = None  # the job's prompts' shared prefixes (core/prefix_reuse.py)
