"""bench/energy.py: a bench point's joules from the agent's power samples."""

from __future__ import annotations

import pytest

from sgltui.bench import energy


def test_constant_power_over_the_span_with_samples_outside_it():
    pts = [[t, 300.0] for t in range(0, 20)]
    assert energy.integrate(pts, 5.5, 10.5) == pytest.approx(1500.0)


def test_ramp_and_the_ends_held_from_the_nearest_sample():
    pts = [[10.0, 100.0], [12.0, 300.0]]
    # [9, 10] at 100 held, [10, 12] trapezoid 400, [12, 13] at 300 held
    assert energy.integrate(pts, 9.0, 13.0) == pytest.approx(100.0 + 400.0 + 300.0)


def test_nothing_to_integrate_and_the_fields():
    assert energy.integrate([], 0.0, 1.0) is None
    assert energy.integrate([[0.0, "x"]], 0.0, 1.0) is None
    assert energy.energy_fields(None, 10, 100)["joules"] is None
    f = energy.energy_fields(1000.0, 10, 500)
    assert f == {"joules": 1000.0, "j_per_completion": 100.0, "tok_per_j": 0.5}
