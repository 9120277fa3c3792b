"""Issue 51 item 9: `sgltui bench` ran 16 minutes with no estimate. It says the run's size and
time before the first point (`--duration`) or once the first requests give a rate
(`--requests`), and each progress line ends with the ETA."""

from __future__ import annotations

import pytest

from sgltui.bench.eta import RunClock, opening_line

README = {  # the README's example: 2 profiles x 3 concurrencies x 3 repeats x 160 requests
    "profiles": ["demo-mtp", "demo-no-mtp"],
    "concurrency": [1, 4, 16],
    "repeat": 3,
    "requests": 160,
}


def msg(point, phase, done=0, **kw):
    return {"point": point, "points": 18, "phase": phase, "done": done, **kw}


def test_duration_runs_say_their_time_before_the_first_point():
    spec = dict(README, requests=None, duration=40.0)
    assert opening_line(spec) == (
        "18 points (2 profiles x 3 concurrencies x 3 repeats): about 12 min of load, "
        "plus warmups and swaps"
    )


def test_requests_runs_estimate_from_the_first_rate_and_count_down():
    clock = RunClock(README)
    assert clock.total() is None  # nothing measured: no number made up
    clock.observe(msg(1, "measure"), now=0.0)
    clock.observe(msg(1, "measure", done=10), now=20.0)  # c=1: 0.5 requests/s
    # c=1 points: 161 requests / 0.5 = 322 s; c=4 and c=16 guessed at 2x and 4x that rate
    per = {1: 161 / 0.5, 4: 164 / 1.0, 16: 176 / 2.0}
    assert clock.total() == pytest.approx(3 * 2 * sum(per.values()))
    left = clock.remaining(20.0)
    assert left == pytest.approx(clock.total() - 20.0 - 1 / 0.5)  # 150 of 160 left in point 1
    # the c=4 point measured faster than guessed: the estimate follows
    clock.observe(msg(4, "measure"), now=1000.0)
    clock.observe(msg(4, "measure", done=40), now=1010.0)  # 4 requests/s
    assert clock.point_seconds(5) == pytest.approx(164 / 4.0)


def test_the_cli_prints_the_estimate_once_and_an_eta_on_each_line(capsys, monkeypatch):
    from sgltui.commands import bench as cli

    now = [0.0]
    monkeypatch.setattr(cli.time, "monotonic", lambda: now[0])
    printer = cli._Printer(dict(README))
    for t, m in ((0.0, msg(1, "measure", profile="demo-mtp", concurrency=1)),
                 (20.0, msg(1, "measure", done=10, total=160, profile="demo-mtp", concurrency=1)),
                 (330.0, msg(2, "starting", profile="demo-mtp", concurrency=1, repeat=1))):  # fmt: skip
        now[0] = t
        printer(m)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("18 points (2 profiles x 3 concurrencies x 3 repeats) of 160 requests")
    assert sum("estimated run time: about" in line for line in err) == 1
    # 6 x (322 + 164 + 88) s in all, less the first c=1 point: 3,122 s
    assert [line for line in err if line.startswith("[")][-1].endswith(" · ETA 52 min")
