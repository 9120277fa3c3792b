"""The NVML timeline of a warm_check run, in words (not CI): for each swap, GPU memory used at
each marker and at every step of more than --step GiB in between, relative to the keystroke.

    python3 tools/gpucheck/timeline_summary.py WARM_TIMELINE_JSON [--step 2] [--markdown]

warm_timeline.json holds {"markers": [[t, label]], "samples": [[t, used_gib, {pid: gib}]]}; a
swap runs from a "warm N: keystroke" or "cold N: keystroke" marker to the next "answers" marker.
Between two listed points memory moved by less than --step GiB, so a copy of 40 GiB shows as a
ramp of a few lines and a plateau as one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def used_at(samples: list[list], t: float) -> float | None:
    """The last sample at or before t (NVML's reading then), else the first after it."""
    before = [s for s in samples if s[0] <= t]
    if before:
        return before[-1][1]
    return samples[0][1] if samples else None


def swaps(markers: list[list]) -> list[tuple[str, float, float, list[list]]]:
    """(name, t_keystroke, t_answer, markers in between) for each warm and cold swap."""
    out = []
    for i, (t, label) in enumerate(markers):
        if ": keystroke" not in label:
            continue
        name = label.split(":")[0]
        inner = [[t, label]]
        for t2, label2 in markers[i + 1 :]:
            inner.append([t2, label2])
            if label2.endswith("answers"):
                break
        out.append((name, t, inner[-1][0], inner))
    return out


def points(samples: list[list], t0: float, t1: float, step: float) -> list[tuple[float, float]]:
    """Samples in [t0, t1] where used memory moved by >= step GiB since the last one kept,
    with the first and last sample always kept."""
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if not inside:
        return []
    kept = [(inside[0][0], inside[0][1])]
    for t, used, *_ in inside[1:]:
        if abs(used - kept[-1][1]) >= step:
            kept.append((t, used))
    if kept[-1][0] != inside[-1][0]:
        kept.append((inside[-1][0], inside[-1][1]))
    return kept


def summarise(timeline: dict, step: float) -> list[dict]:
    samples, markers = timeline["samples"], timeline["markers"]
    rows = []
    for name, t0, t1, inner in swaps(markers):
        events = [(t, f"[{label.split(': ', 1)[-1]}]", used_at(samples, t)) for t, label in inner]
        events += [(t, "", u) for t, u in points(samples, t0, t1, step)]
        events.sort(key=lambda e: (e[0], e[1] == ""))
        inside = [s[1] for s in samples if t0 <= s[0] <= t1]
        rows.append(
            {
                "swap": name,
                "seconds": round(t1 - t0, 3),
                "peak_gib": max(inside) if inside else None,
                "low_gib": min(inside) if inside else None,
                "events": [(round(t - t0, 2), what, u) for t, what, u in events],
            }
        )
    return rows


def render(rows: list[dict], markdown: bool) -> str:
    lines = []
    for r in rows:
        head = f"{r['swap']}: {r['seconds']} s, used {r['low_gib']}..{r['peak_gib']} GiB"
        lines.append(f"- {head}" if markdown else head)
        for dt, what, used in r["events"]:
            text = f"+{dt:6.2f} s  {used if used is not None else '?':>7} GiB  {what}".rstrip()
            lines.append(f"    {text}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("timeline", type=Path)
    p.add_argument("--step", type=float, default=2.0, help="GiB of change worth a line")
    p.add_argument("--markdown", action="store_true", help="one bullet a swap")
    a = p.parse_args()
    try:
        timeline = json.loads(a.timeline.read_text())
    except (OSError, ValueError) as e:
        print(
            f"cannot read {a.timeline}: {e}; give warm_check's warm_timeline.json", file=sys.stderr
        )
        return 2
    if not timeline.get("samples"):
        print(f"{a.timeline} has no NVML samples (a run without NVML): nothing to summarise")
        return 1
    print(render(summarise(timeline, a.step), a.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
