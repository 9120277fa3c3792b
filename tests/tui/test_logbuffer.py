"""The log tail: levels, filter (smart case), search with wrap-around, bounded size."""

from sgltui.tui.logbuffer import LogBuffer, line_level


def test_levels_from_sglang_lines():
    assert (
        line_level(
            "[2026-10-01 12:00:41] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"
        )
        == "error"
    )
    assert (
        line_level("[Errno 98] error while attempting to bind on address: address already in use")
        == "error"
    )
    assert line_level("Max running requests is reset to 48 for speculative decoding.") == "warning"
    assert line_level("'--foo' is deprecated and will be removed in a future release.") == "warning"
    assert (
        line_level(
            "Decode batch, #running-req: 4, token usage: 0.30, gen throughput (token/s): 10.0"
        )
        == "info"
    )


def test_bounded_and_sequenced():
    buf = LogBuffer(max_lines=100)
    buf.add("0", [f"line {i}" for i in range(250)])
    assert len(buf.lines) == 100
    assert buf.lines[0].text == "line 150" and buf.lines[-1].seq == 250


def test_filter_smart_case_and_level():
    buf = LogBuffer()
    buf.add(
        "0",
        [
            "Decode batch a",
            "decode later",
            "WARNING low memory",
            "Traceback (most recent call last):",
        ],
    )
    buf.set_filter("decode")
    assert [l.text for l in buf.visible()] == ["Decode batch a", "decode later"]
    buf.set_filter("Decode")  # a capital makes it case-sensitive
    assert [l.text for l in buf.visible()] == ["Decode batch a"]
    buf.set_filter("")
    buf.min_level = "warning"
    assert [l.level for l in buf.visible()] == ["warning", "error"]
    buf.min_level = "error"
    assert [l.text for l in buf.visible()] == ["Traceback (most recent call last):"]


def test_search_wraps_both_ways_and_spans():
    buf = LogBuffer()
    buf.add("0", ["alpha", "beta ready", "gamma", "ready delta"])
    lines = buf.visible()
    buf.search_text = "ready"
    assert buf.search(lines, 1) == 3
    assert buf.search(lines, 3) == 1  # wraps to the start
    assert buf.search(lines, 1, backwards=True) == 3
    assert list(buf.search_spans("ready, Ready!")) == [(0, 5), (7, 12)]
    buf.search_text = "nothing"
    assert buf.search(lines, 0) is None
