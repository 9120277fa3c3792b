import math

import pytest

from sgltui.core.ring import Ring, RingSet


def test_ring_keeps_only_the_newest_points_in_order():
    r = Ring(5)
    for i in range(12):
        r.append(float(i), i * 10)
    assert len(r) == 5
    assert r.items() == [[float(i), float(i * 10)] for i in range(7, 12)]
    assert r.last() == (11.0, 110.0)


def test_ring_before_full_and_since_filter():
    r = Ring(10)
    for i in range(4):
        r.append(100.0 + i, i)
    assert [p[0] for p in r.items()] == [100.0, 101.0, 102.0, 103.0]
    assert r.items(since=101.0) == [[102.0, 2.0], [103.0, 3.0]]


def test_missing_values_come_back_as_none():
    r = Ring(3)
    r.append(1.0, None)
    r.append(2.0, 5)
    assert r.items() == [[1.0, None], [2.0, 5.0]]
    assert not any(isinstance(v, float) and math.isnan(v) for _, v in r.items())


def test_ring_memory_stops_growing_at_capacity():
    r = Ring(100)
    for i in range(100):
        r.append(i, i)
    full = r.nbytes()
    for i in range(10_000):
        r.append(i, i)
    assert r.nbytes() == full


def test_ringset_caps_the_number_of_series():
    rs = RingSet(capacity=4, max_series=3)
    for name in "abcde":
        rs.append(name, 1.0, 1.0)
    assert rs.names() == ["a", "b", "c"]
    assert rs.dropped_series == 2


def test_ring_rejects_zero_capacity():
    with pytest.raises(ValueError):
        Ring(0)
