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


def test_a_line_is_classified_as_the_rules_did_with_fewer_searches():
    """Issue 49, thirteenth round: each pattern starts with a look ahead at the characters its
    words can start with, and a line with none of the patterns is known in one search (the
    rules searched each: four searches and ~12 us a plain line). Every mix of the rules'
    fragments, in any order, with a time prefix, a line break or characters that match an
    ASCII letter when case is ignored (the Kelvin sign, the long s), classifies as the rules'
    own patterns (kept here as they were) say, and line_level and is_noise too."""
    import itertools
    import re

    from sgltui.tui.logbuffer import classify, is_noise

    error = re.compile(
        r"Traceback|\bERROR\b|Error:|Exception|out of memory|OutOfMemory|\bfailed\b|crashed|"
        r"address already in use|Not enough memory|watchdog timeout|Killed",
        re.IGNORECASE,
    )
    warning = re.compile(
        r"\bWARNING\b|\bWARN\b|deprecated|is reset to|fewer than|unbalanced|Warning:"
    )
    access = re.compile(r'(?:^|\] )INFO:\s+\S+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}')
    batch = re.compile(r"(?:Prefill|Decode) batch(?: \[\d+\])?, ")
    head = re.compile(r"^(?:\[[^\]]*\] )?" + batch.pattern)

    def rules(text):
        level = "error" if error.search(text) else "warning" if warning.search(text) else "info"
        noise = access.search(text) is not None or batch.search(text) is not None
        if head.match(text):
            return level, noise, ("info", True)
        return level, noise, (level, level == "info" and noise)

    parts = [
        "Decode batch, #running-req: 4",
        "Prefill batch [12], #new-seq: 1",
        'INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK',
        '] INFO:  1.2.3.4:1 - "POST /generate HTTP/2" 503',
        "traceback (most recent call last)",
        "ERRORS are not an ERROR",
        "it FAILED",
        "Warning: x",
        "WARN",
        "WARNINGS",
        "is reset to 4",
        "Cache flushed: 3 prefix tree nodes",
        "decode batch, lowercase",
        "\u212aILLED by the \u212aernel",  # (KILLED with Kelvin signs)
        "addre\u017f\u017f already in u\u017fe",  # (long s)
        "",
    ]
    seen = set()
    for a, b in itertools.product(parts, repeat=2):
        for text in (a + b, f"[2026-12-07 10:00:00] {a} {b}", f"{a}\n{b}", f"[x TP0] {a}"):
            level, noise, want = rules(text)
            assert classify(text) == want and line_level(text) == level, text
            assert is_noise(text) == noise, text
            assert [(x.level, x.noise) for x in LogBuffer().add("0", [text])] == [want], text
            seen.add(want)
    assert seen == {("info", True), ("info", False), ("error", False), ("warning", False)}


def test_a_ticks_pushes_cost_a_call_or_two_a_line_and_show_as_matches_says():
    """Issue 49, thirteenth round: a tick's pushes go into the buffer in one call of the
    feed (`add_pushes`: the followed slot asked only for a push that names none), each
    slot's lines classified inline and appended in one extend, each line a Struct made in
    C; whether any shows is one call (`shows_any`), what `matches` says of each line under
    every fold, slot, level and filter setting."""
    import itertools
    import sys

    from sgltui.tui.logfeed import LogFeed

    feed = LogFeed(LogBuffer())
    texts = ["[t] Cache flushed: 3 nodes evicted\n", "[t] Decode batch, #running-req: 4"]
    pushes = [{"slot": f"s{i}", "launch_id": "x", "lines": texts[i % 2 :][:1]} for i in range(8)]
    feed.add_pushes(pushes, lambda: None)
    asked = []
    calls = []

    def count(frame, event, arg):
        if event in ("call", "c_call"):
            calls.append(frame.f_code.co_name if event == "call" else arg.__qualname__)

    sys.setprofile(count)
    try:
        added = feed.add_pushes(
            [*pushes, 5, {"lines": ["no slot"]}], lambda: asked.append(1) or "c"
        )
    finally:
        sys.setprofile(None)
    assert [(line.slot, line.text, line.noise) for line in added] == [
        *[(f"s{i}", texts[i % 2].rstrip("\n"), i % 2 == 1) for i in range(8)],
        ("c", "no slot", False),
    ]
    assert asked == [1] and added[0].seq + 8 == added[-1].seq
    # 4 a push of a line (add, match, append, extend), a search more for the 5 that are no
    # batch line, 4 lines stripped, the odd ones: 50
    assert len(calls) <= 50, calls  # (~120 before: classify, its searches, __init__, get)
    buf = feed.buffer
    buf.add("s1", ["WARNING: low", "an ERROR", "cache Error: y"])
    lines = list(buf.lines)
    for noise, only, level, needle in itertools.product(
        (False, True), (None, "s1", "s2"), ("info", "warning", "error"), ("", "error", "Cache")
    ):
        buf.show_noise, buf.only_slot, buf.min_level, buf.filter_text = noise, only, level, needle
        for k in range(len(lines)):
            part = lines[k : k + 3]
            assert buf.shows_any(part) == any(map(buf.matches, part)), (noise, only, level, needle)
