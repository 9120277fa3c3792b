"""`sgltui job status`'s text (commands/jobs.py render_status)."""

from __future__ import annotations

from sgltui import protocol
from sgltui.commands.jobs import render_status


def test_a_segment_under_a_second_shows_no_rate():
    """Issue 35: '480 tokens in 0s (2.53M tok/s)': answers that came at once are no rate."""
    seg = protocol.JobSegment(
        profile="p", launch_id="l1", started=100.0, last=100.19, completions=60, out_tokens=480
    )
    v = protocol.JobView(
        id="j1",
        state=protocol.JobState.DONE,
        slot="0",
        input="in.jsonl",
        output="out.jsonl",
        errors_output="out.errors.jsonl",
        concurrency=8,
        concurrency_mode="fixed",
        created=100.0,
        segments=[seg],
    )
    text = render_status(v)
    line = next(ln for ln in text.splitlines() if "segment p" in ln)
    assert "480 tokens in under 1s" in line and "tok/s" not in line, line
    seg.last = 110.0
    line = next(ln for ln in render_status(v).splitlines() if "segment p" in ln)
    assert "tok/s" in line, line
