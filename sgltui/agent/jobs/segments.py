"""A batch job's segments: its share of each launch it was sent to (completions, tokens, time),
for status and the report. A swap between two profiles under a running job shows as two
segments, each with the hash of what its server ran (agent/provenance.py).

Functions over the job's record (agent/jobs/records.py); `publish` stamps and sends a job's
event (the jobs host's)."""

from __future__ import annotations

import time
from collections.abc import Callable

from sgltui import protocol
from sgltui.agent.jobs.records import JobRecord, SegmentRecord, answered, failed, out_tokens

Publish = Callable[[JobRecord, protocol.JobEvent], None]


def place_resumed(rec: JobRecord, checked: dict) -> None:
    """The runner's check of the output file (`checked`): what the last runner wrote after the
    record was last saved (a kill -9 of the agent) belongs to the segment it was written in."""
    if rec.segments:
        seg = rec.segments[-1]
        seg.completions += max(0, checked["resumed_ok"] - answered(rec))
        seg.failed += max(0, checked["resumed_failed"] - failed(rec))
        seg.out_tokens += max(0, checked["resumed_out_tokens"] - out_tokens(rec))


def current(
    rec: JobRecord, info_hash: Callable[[str | None], str | None], publish: Publish
) -> SegmentRecord | None:
    """The segment of the launch the runner was pointed at (a new one when that changed):
    answers reported after a swap began still belong to the server that gave them."""
    segs = rec.segments
    launch_id, profile = rec.target_launch, rec.target_profile
    if not launch_id:
        return segs[-1] if segs else None
    if segs and segs[-1].launch_id == launch_id:
        if not segs[-1].info_hash:  # kept a moment after the ready
            segs[-1].info_hash = info_hash(launch_id)
        return segs[-1]
    if segs:
        close(rec, segs[-1], publish)
    seg = SegmentRecord(
        profile=profile,
        launch_id=launch_id,
        info_hash=info_hash(launch_id),
        started=time.time(),
        last=time.time(),
    )
    segs.append(seg)
    publish(
        rec,
        protocol.JobSegmentStart(
            profile=seg.profile, launch_id=seg.launch_id, info_hash=seg.info_hash
        ),
    )
    return seg


def close(rec: JobRecord, seg: SegmentRecord, publish: Publish) -> None:
    if seg.closed:
        return
    seg.closed = True
    secs = max(0.0, seg.last - seg.started)
    tok_s = round(seg.out_tokens / secs, 1) if secs > 0 else None
    publish(
        rec,
        protocol.JobSegmentDone(
            profile=seg.profile,
            launch_id=seg.launch_id,
            info_hash=seg.info_hash,
            completions=seg.completions,
            failed=seg.failed,
            out_tokens=seg.out_tokens,
            in_tokens=seg.in_tokens,
            seconds=round(secs, 3),
            tok_s=tok_s,
            joules=seg.joules,
        ),
    )


def follow_pool(rec: JobRecord, profiles: list[str]) -> None:
    """A pool job's segment is what the pool's routable slots run (`profiles`, sorted): the
    gateway spreads the job over all of them, so no one slot's launch says it (a rolling swap
    moves it from `a` through `mixed: a, b` to `b`). A new segment whenever that changes."""
    if not profiles:  # nothing routable now: the answers still coming belong where they were
        return
    label = profiles[0] if len(profiles) == 1 else "mixed: " + ", ".join(profiles)
    if rec.target_launch and label == rec.target_profile:
        return
    rec.pool_mixes += 1
    # Not a launch of one server: the pool's n-th mix (a segment id the report keeps apart)
    rec.target_launch, rec.target_profile = f"pool {rec.pool} #{rec.pool_mixes}", label
