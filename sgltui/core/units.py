"""How sgltui writes durations and sizes for people: one helper each.

Sizes are binary (1 GiB = 2**30 bytes) and labelled GiB, as nvidia-smi's MiB and SGLang's own
"GB" log figures (which are also 2**30) are.
"""

from __future__ import annotations

GIB = 2**30


def duration(seconds: float | None, missing: str = "-") -> str:
    """'0m42s', '3m05s', '2h04m' (whole seconds, cut): uptimes and ages in tables."""
    if seconds is None or seconds != seconds:  # None or NaN
        return missing
    secs = max(0, int(seconds))
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def gib(n_bytes: float | None, digits: int = 1, missing: str = "-") -> str:
    """'12.5 GiB'."""
    if n_bytes is None:
        return missing
    return f"{n_bytes / GIB:.{digits}f} GiB"
