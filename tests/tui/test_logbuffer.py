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


def test_batch_lines_fold_as_info_and_other_lines_keep_their_level():
    """classify: a batch line (with or without a rank tag or an iteration number) is a folded
    info line without the level patterns; an access line of a failed request is still an
    error; any other line gets line_level and is shown."""
    from sgltui.tui.logbuffer import classify

    batch = [
        "[2026-10-01 12:00:41 TP0] Prefill batch, #new-seq: 4, #new-token: 8192, "
        "#cached-token: 1536, token usage: 0.07, #running-req: 12, #queue-req: 3",
        "[2026-10-01 12:00:43] Decode batch [812], #running-req: 16, token usage: 0.09, "
        "cuda graph: True, gen throughput (token/s): 1874.20, #queue-req: 0",
        "Decode batch, #running-req: 1, #retracted-req: 0, cuda graph: True",
    ]
    for text in batch:
        assert classify(text) == ("info", True), text
    access_ok = '[2026-10-01 12:00:09] INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK'
    access_500 = (
        '[2026-10-01 12:00:09] INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 500 '
        "Internal Server Error"
    )
    assert classify(access_ok) == ("info", True)
    assert classify(access_500) == ("error", False)
    oom = "[2026-10-01 12:00:50 TP0] Prefill batch failed: CUDA out of memory"
    assert classify(oom) == ("error", False)  # not a batch line: no ", " after "batch"
    assert classify("Max running requests is reset to 48") == ("warning", False)
    assert classify("[2026-10-01 12:00:01] Load weight end.") == ("info", False)


def test_a_ticks_pushes_are_read_and_classified_in_few_calls():
    """Issue 49: a tick's push per slot is read with `in` and subscripts (no dict.get, no
    pop of a tail read when none waits) and each line classified with the level and fold
    patterns inline (line_level and is_noise's rules, not a call to each): 8 slots' pushes of
    a line each cost ~100 calls (~150 before). What they add is what the rules say: the
    level, the fold, the launch's mark when a slot's launch changes, the tail's lines the
    first push repeats dropped."""
    import sys

    from sgltui import protocol
    from sgltui.tui.logbuffer import classify, is_noise
    from sgltui.tui.logfeed import LogFeed

    texts = [
        "[2026-12-07 10:00:00] Cache flushed: 3 prefix tree nodes evicted",
        "[2026-12-07 10:00:00] Decode batch, #running-req: 4, #token: 8000",
        'INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK',
        "a Warning: deprecated flag, then an ERROR",
        "Max running requests is reset to 4",
        "x Prefill batch, #new-seq: 1 failed",
    ]
    for text in texts:
        level = line_level(text)
        assert classify(text) == (level, level == "info" and is_noise(text)), text
    feed = LogFeed(LogBuffer())
    feed.add_tail("1", protocol.LogsReply(lines=["old", "last"], path="log", launch_id="x"))
    first = feed.add_push({"slot": "1", "launch_id": "x", "lines": ["last", "new"]}, None)
    assert [line.text for line in first] == ["new"]
    swap = feed.add_push({"slot": "1", "launch_id": "y", "lines": ["up"]}, None)
    assert [line.text for line in swap] == ["──── y ────", "up"]
    pushes = [{"slot": f"s{i}", "launch_id": "x", "lines": texts[:1]} for i in range(8)]
    for push in pushes:  # (the slots' launches known, as in a served second)
        feed.add_push(push, None)
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(count)
    try:
        added = [line for push in pushes for line in feed.add_push(push, None)]
    finally:
        sys.setprofile(None)
    assert [(line.slot, line.level, line.noise) for line in added] == [
        (f"s{i}", "info", False) for i in range(8)
    ]
    assert feed.add_push({"lines": ["mine"]}, "3")[0].slot == "3"
    assert calls <= 110, calls
