"""The report's numbers as people read them: tok/s to three significant digits, sizes in GiB."""

from __future__ import annotations

import re

import pytest

from sgltui.session.reader import load_session
from sgltui.session.report import build_report, render

from . import builder


@pytest.fixture
def markdown(isolated_env):
    return render(build_report(load_session(builder.build(isolated_env))), "md")


def test_throughput_columns_have_three_significant_digits(markdown):
    line = next(l for l in markdown.splitlines() if l.startswith("| demo-no-mtp |") and "GiB" in l)
    cells = [c.strip() for c in line.strip("|").split("|")]
    for tok_s in cells[2:6]:  # gen tok/s mean, while busy, p50, max
        assert re.fullmatch(r"\d\.\d\dk|\d\d\.\dk|\d{3}k?|\d\d\.\d|\d\.\d\d", tok_s), cells
    assert re.fullmatch(r"\d+\.\d GiB", cells[-1]), cells  # GPU used max, binary


def test_no_decimal_gb_labels(markdown):
    assert not re.search(r"\d GB\b", markdown)
