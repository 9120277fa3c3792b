"""core/units.py: the one formatter each for durations, sizes and rates."""

from __future__ import annotations

import math

import pytest

from sgltui.core import units

GIB = 2**30


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (42.9, "42s"), (125, "2m05s"), (3599, "59m59s"), (3600, "1h00m"), (7440, "2h04m")],
)
def test_duration_is_compact_and_cut_to_the_second(seconds: float, text: str) -> None:
    assert units.duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "<1m"),
        (59.9, "<1m"),
        (60, "1m"),
        (185, "3m"),
        (3599, "59m"),
        (7445, "2h04m"),
        (86400 + 4 * 3600 + 59, "1d04h"),
    ],
)
def test_age_says_whole_minutes(seconds: float, text: str) -> None:
    assert units.age(seconds) == text


@pytest.mark.parametrize("bad", [None, math.nan, math.inf])
def test_every_helper_writes_missing_for_no_reading(bad: float | None) -> None:
    assert units.duration(bad) == "-"
    assert units.age(bad) == "-"
    assert units.estimate(bad) == "n/a"
    assert units.span(bad) == "-"
    assert units.offset(bad) == "-"
    assert units.gib(bad) == "-"
    assert units.size(bad) == "-"
    assert units.byte_rate(bad) == "-"
    assert units.sig3(bad) == "-"
    assert units.tok_s(bad, missing="?") == "?"


def test_negative_durations_read_as_zero() -> None:
    assert units.duration(-5) == "0s"
    assert units.offset(-5) == "0:00"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(30, "30 s"), (600, "10 min"), (5 * 3600, "5.0 h"), (4 * 86400, "4.0 days")],
)
def test_estimate_says_no_more_than_its_minute(seconds: float, text: str) -> None:
    assert units.estimate(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.4213, "0.42 s"), (12.34, "12.3 s"), (270, "4.5 min"), (7560, "2.1 h")],
)
def test_span_keeps_its_precision(seconds: float, text: str) -> None:
    assert units.span(seconds) == text


def test_offset_reads_like_a_player() -> None:
    assert units.offset(125) == "2:05"
    assert units.offset(3725) == "1:02:05"


def test_sizes_are_binary_and_say_so() -> None:
    assert units.gib(12.5 * GIB) == "12.5 GiB"
    assert units.gib(12.5 * GIB, unit=False) == "12.5"
    assert units.gib(1e9) == "0.9 GiB"  # a decimal GB is not a GiB
    assert units.gib_of(72 * GIB, 96 * GIB) == "72.0/96.0 GiB"
    assert units.size(512) == "512 B"
    assert units.size(3.4 * 1024) == "3.4 KiB"
    assert units.size(120 * 2**20) == "120.0 MiB"
    assert units.size(4.25 * GIB) == "4.2 GiB"
    assert units.byte_rate(2.5 * GIB) == "2.5 GiB/s"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (0.5123, "0.512"),
        (5.123, "5.12"),
        (51.23, "51.2"),
        (182.4, "182"),
        (999.4, "999"),
        (999.7, "1.00k"),  # rounds up into the next unit, not "1000"
        (1234, "1.23k"),
        (12_345, "12.3k"),
        (123_456, "123k"),
        (1_234_000, "1.23M"),
        (-42.42, "-42.4"),
    ],
)
def test_sig3_rounds_to_three_significant_digits(value: float, text: str) -> None:
    assert units.sig3(value) == text


def test_tok_s_adds_the_unit() -> None:
    assert units.tok_s(12_345) == "12.3k tok/s"
    assert units.tok_s(None) == "-"


def test_times_of_day_are_local(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        ts = 1_796_226_003.0  # 2026-12-02 15:40:03 UTC
        assert units.clock(ts) == "15:40:03"
        assert units.timestamp(ts) == "2026-12-02 15:40:03"
        assert units.timestamp(ts, seconds=False) == "2026-12-02 15:40"
        assert units.clock(None) == "--:--:--" and units.timestamp(None) == "-"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_energy_reads_the_same_in_the_cli_and_narrow_in_the_jobs_pane() -> None:
    assert units.energy(51_234.0, 15_000, 150_000) == "51.2 kJ, 3.42 J/completion, 2.93 tok/J"
    assert units.energy(51_234.0, 15_000, 150_000, narrow=True) == (
        "51.2 kJ  3.42 J/compl  2.93 tok/J"
    )
    assert units.energy(900.0, 0, 0) == "0.900 kJ"
