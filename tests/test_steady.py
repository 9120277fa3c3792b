"""core.steady: a figure shown as top shows CPU, the mean of each 3 s window."""

from sgltui.core.steady import WindowMean


def test_the_first_value_shows_at_once_then_each_windows_mean():
    cpu = WindowMean(3.0)
    assert cpu.add(100.0, 10.0) == 10.0  # a new TUI shows a figure at once
    assert cpu.add(101.0, 40.0) == 10.0  # inside the window: unchanged, no repaint
    assert cpu.add(102.0, 1.0) == 10.0
    assert cpu.add(103.0, 5.0) == 14.0  # the window's mean: (10 + 40 + 1 + 5) / 4
    assert cpu.add(104.0, 30.0) == 14.0
    assert cpu.add(106.0, 6.0) == 18.0  # the next window: (30 + 6) / 2


def test_a_sample_seen_twice_or_missing_changes_nothing():
    cpu = WindowMean(3.0)
    cpu.add(10.0, 50.0)
    assert cpu.add(10.0, 0.0) == 50.0  # the status snapshot repeats the pushed sample
    assert cpu.add(9.0, 0.0) == 50.0
    assert cpu.add(11.0, None) == 50.0
    assert cpu.add(13.0, 20.0) == 35.0  # only 50 and 20 count


def test_a_figure_that_changes_every_second_is_shown_a_third_as_often():
    cpu = WindowMean(3.0)
    shown = [cpu.add(float(t), float(t % 7)) for t in range(60)]
    changes = sum(1 for a, b in zip(shown, shown[1:]) if a != b)
    assert 15 <= changes <= 20, changes
