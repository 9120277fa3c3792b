"""How sgltui writes times, durations, sizes and rates for people: the one place each is
formatted.

Sizes are binary (1 GiB = 2**30 bytes) and labelled GiB: nvidia-smi's MiB and the "GB" figures
in SGLang's start-up log (weights, KV pool, `mem usage`) are 2**30 too, so one unit reads the
same in the TUI, `sgltui top`, `status` and the session report. A figure that is really decimal
(SGLang's `--hicache-size` and its hicache host-pool log line) is converted from its decimal
bytes (x GB), never relabelled. Transfer rates (PCIe) are binary as well.

Every helper takes None (and NaN, inf) for "no reading" and writes `missing` for it.
"""

from __future__ import annotations

import math
import time

GIB = 2**30
MIB = 2**20
KIB = 2**10
GB = 10**9  # decimal: only for figures SGLang itself counts in 1e9 bytes (hicache)


def _finite(value: float | None) -> float | None:
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return None
    return float(value)


# -- times of day --------------------------------------------------------------------------


def clock(ts: float | None, missing: str = "--:--:--") -> str:
    """A Unix time as the local time of day: '15:40:03' (Activity, replay)."""
    value = _finite(ts)
    return time.strftime("%H:%M:%S", time.localtime(value)) if value else missing


def timestamp(ts: float | None, missing: str = "-", seconds: bool = True) -> str:
    """A Unix time as local date and time: '2026-12-02 15:40:03' ('2026-12-02 15:40' without
    seconds, for lists)."""
    value = _finite(ts)
    if not value:
        return missing
    return time.strftime(
        "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M", time.localtime(value)
    )


# -- durations -----------------------------------------------------------------------------


def _hms(seconds: float | None) -> tuple[int, int, int] | None:
    """Whole hours, minutes and seconds (cut, never negative), or None for no reading."""
    value = _finite(seconds)
    if value is None:
        return None
    h, rem = divmod(max(0, int(value)), 3600)
    m, s = divmod(rem, 60)
    return h, m, s


def duration(seconds: float | None, missing: str = "-") -> str:
    """An elapsed time, compact: '42s', '3m05s', '2h04m' (whole seconds, cut).

    Uptimes, ages, ETAs in panes and tables, where 80 columns leave little room."""
    hms = _hms(seconds)
    if hms is None:
        return missing
    h, m, s = hms
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{s:02d}s" if m else f"{s}s"


def age(seconds: float | None, missing: str = "-") -> str:
    """How long something has been up, to the minute: '<1m', '12m', '2h04m', '3d04h'. It
    changes once a minute, so a pane that shows it repaints once a minute, and a status read
    every few seconds never shows a seconds figure that has gone stale."""
    hms = _hms(seconds)
    if hms is None:
        return missing
    h, m, s = hms
    if h >= 24:
        return f"{h // 24}d{h % 24:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m" if m else "<1m"


def estimate(seconds: float | None, missing: str = "n/a") -> str:
    """A rough length, for what is yet to run: '45 s', '12 min', '5.0 h', '4.0 days'.

    An estimate is no better than its minute, so it says no more than that."""
    value = _finite(seconds)
    if value is None:
        return missing
    value = max(0.0, value)
    if value < 120:
        return f"{value:.0f} s"
    if value < 2 * 3600:
        return f"{value / 60:.0f} min"
    if value < 72 * 3600:
        return f"{value / 3600:.1f} h"
    return f"{value / 86400:.1f} days"


def ci_share(mean: object, high: object) -> str | None:
    """A 95% CI as its half-width in percent of the mean ('±3.2%'): the one way the bench's
    comparison, its job estimate and the session report say their uncertainty (None: no CI,
    a single run)."""
    if not isinstance(mean, (int, float)) or not isinstance(high, (int, float)):
        return None
    if not (math.isfinite(mean) and math.isfinite(high)) or mean <= 0:
        return None
    return f"±{(high - mean) / mean * 100:.2g}%"


def span(seconds: float | None, missing: str = "-") -> str:
    """A measured span, to its precision: '0.42 s', '12.3 s', '4.5 min', '2.1 h' (latencies,
    start-up and swap times in reports)."""
    value = _finite(seconds)
    if value is None:
        return missing
    if value < 10:
        return f"{value:.2f} s"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def offset(seconds: float | None, missing: str = "-") -> str:
    """A position in a recording, as players show it: '2:05', '1:02:05' (whole seconds)."""
    hms = _hms(seconds)
    if hms is None:
        return missing
    h, m, s = hms
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


# -- sizes ---------------------------------------------------------------------------------


def gib(n_bytes: float | None, digits: int = 1, missing: str = "-", unit: bool = True) -> str:
    """'12.5 GiB' (unit=False: '12.5', for a column or a pair that states the unit once)."""
    value = _finite(n_bytes)
    if value is None:
        return missing
    text = f"{value / GIB:.{digits}f}"
    return f"{text} GiB" if unit else text


def gib_of(used: float | None, total: float | None, digits: int = 1, missing: str = "-") -> str:
    """'72.0/96.0 GiB': a used/total pair with the unit once."""
    return f"{gib(used, digits, missing, unit=False)}/{gib(total, digits, missing, unit=False)} GiB"


def size(n_bytes: float | None, missing: str = "-") -> str:
    """Any size in the binary unit that reads best: '512 B', '3.4 KiB', '120.0 MiB', '4.2 GiB'."""
    value = _finite(n_bytes)
    if value is None:
        return missing
    if abs(value) < KIB:
        return f"{value:.0f} B"
    for name, div in (("KiB", KIB), ("MiB", MIB)):
        if abs(value) < div * 1024:
            return f"{value / div:.1f} {name}"
    return f"{value / GIB:.1f} GiB"


def byte_rate(bytes_s: float | None, missing: str = "-") -> str:
    """A transfer rate in binary units: '2.3 GiB/s', '1.4 MiB/s', '12.0 KiB/s', '800 B/s'."""
    text = size(bytes_s, missing)
    return text if text == missing else f"{text}/s"


# -- rates and counts ----------------------------------------------------------------------


def sig3(value: float | None, missing: str = "-") -> str:
    """Three significant digits, thousands as k and millions as M: '0.512', '5.12', '51.2',
    '512', '1.23k', '12.3k', '123k', '1.23M'. A throughput that moves by the second reads
    steady this way, and its width stays within five characters."""
    v = _finite(value)
    if v is None:
        return missing
    if v == 0:
        return "0"
    rounded = float(f"{abs(v):.3g}")  # 999.7 -> 1000.0, so that it reads 1.00k, not 1000
    sign = "-" if v < 0 else ""
    for suffix, div in (("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9)):
        if rounded < div * 1000 or suffix == "G":
            scaled = rounded / div
            digits = max(0, 2 - math.floor(math.log10(scaled) + 1e-9))
            return f"{sign}{scaled:.{digits}f}{suffix}"
    raise AssertionError("unreachable")


def tok_s(value: float | None, missing: str = "-") -> str:
    """A token throughput: '182 tok/s', '12.3k tok/s' (sig3 of the rate)."""
    text = sig3(value, missing)
    return text if text == missing else f"{text} tok/s"


def energy(joules: float, completions: int, out_tokens: int, narrow: bool = False) -> str:
    """A job's (or segment's) GPU energy: '51.2 kJ, 3.41 J/completion, 2.93 tok/J'; `narrow`
    (the Jobs pane) writes '51.2 kJ  3.41 J/compl  2.93 tok/J'."""
    sep, per = ("  ", "J/compl") if narrow else (", ", "J/completion")
    text = f"{sig3(joules / 1000)} kJ"
    if completions:
        text += f"{sep}{sig3(joules / completions)} {per}"
    if joules > 0 and out_tokens:
        text += f"{sep}{sig3(out_tokens / joules)} tok/J"
    return text
