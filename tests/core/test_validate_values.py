"""Bad numeric values and dashed keys (issue 18, defect 6): the validator passed 57 of 75 of these
(tp-size = 0, mem-fraction-static = nan, speculative-algorithm = 7, "--port" ...)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgltui.core.flags import Catalog, FlagSpec, load_bundled_catalog
from sgltui.core.profiles import get_profile
from sgltui.core.validate import check_profile
from tests.core.helpers import write

CATALOG = load_bundled_catalog()


def errors(tmp_path: Path, server: str, launcher: str = "sglang", catalog=CATALOG) -> list[str]:
    body = f'name = "t"\nlauncher = "{launcher}"\n[server]\nmodel-path = "org/m"\n{server}'
    path = write(tmp_path, "t.toml", body)
    return [str(i) for i in check_profile(get_profile(str(path)), catalog) if i.is_error]


BAD = [
    ("tp-size = 0", "tp-size: must be at least 1"),
    ("tp-size = -4", "tp-size: must be at least 1"),
    ("tp-size = 100000", "tp-size: must be at most 1024"),
    ('tp-size = "0"', "tp-size: must be at least 1"),
    ("tensor-parallel-size = 0", "tensor-parallel-size: must be at least 1"),
    ("dp-size = 0", "dp-size: must be at least 1"),
    ("pp-size = -1", "pp-size: must be at least 1"),
    ("mem-fraction-static = nan", "mem-fraction-static: must be a finite number, not nan"),
    ("mem-fraction-static = inf", "mem-fraction-static: must be a finite number, not inf"),
    ("mem-fraction-static = -inf", "mem-fraction-static: must be a finite number, not -inf"),
    ('mem-fraction-static = "nan"', "mem-fraction-static: must be a finite number, not nan"),
    ("mem-fraction-static = 7.0", "mem-fraction-static: must be at most 1"),
    ("mem-fraction-static = -0.5", "mem-fraction-static: must be more than 0"),
    ("mem-fraction-static = 0", "mem-fraction-static: must be more than 0"),
    ("max-running-requests = 0", "max-running-requests: must be at least 1"),
    ("max-running-requests = -3", "max-running-requests: must be at least 1"),
    ("page-size = 0", "page-size: must be at least 1"),
    ("context-length = -1", "context-length: must be at least 1"),
    ("watchdog-timeout = -5.0", "watchdog-timeout: must be more than 0"),
    ("schedule-conservativeness = nan", "schedule-conservativeness: must be a finite number"),
    ("nccl-port = 70000", "nccl-port: port 70000 is out of range"),
    ("port = 0", "port: port 0 is out of range"),
    ("random-seed = 99999999999999999999999", "random-seed: must be at most"),
    ("speculative-algorithm = 7", "speculative-algorithm: invalid value '7'"),
    ("speculative-algorithm = 1.5", "speculative-algorithm: invalid value '1.5'"),
    ('"--port" = 30001', "--port: write the flag name without leading dashes; write port = 30001"),
    ('"-tp-size" = 2', "-tp-size: write the flag name without leading dashes; write tp-size = 2"),
    ("revision = nan", "revision: must be a finite number, not nan"),
]


@pytest.mark.parametrize("server,expected", BAD, ids=[b[0] for b in BAD])
def test_bad_values_are_errors(tmp_path, server, expected):
    found = errors(tmp_path, server + "\n")
    assert any(expected in e for e in found), found


SIM_BAD = [
    ("sim-time-scale = -1", "sim-time-scale: must be at least 0"),
    ("sim-time-scale = nan", "sim-time-scale: must be a finite number, not nan"),
    ("sim-time-scale = inf", "sim-time-scale: must be a finite number, not inf"),
    ("sim-crash-after = -2.0", "sim-crash-after: must be at least 0"),
    ("sim-host-memory-gb = 0", "sim-host-memory-gb: must be more than 0"),
    ("sim-slow-start = -1", "sim-slow-start: must be more than 0"),
    ("tp-size = 0", "tp-size: must be at least 1"),
]


@pytest.mark.parametrize("server,expected", SIM_BAD, ids=[b[0] for b in SIM_BAD])
def test_bad_sim_values_are_errors(tmp_path, server, expected):
    found = errors(tmp_path, server + "\n", launcher="sim")
    assert any(expected in e for e in found), found


GOOD = [
    "tp-size = 8",
    'tp-size = "2"',
    "mem-fraction-static = 0.85",
    "mem-fraction-static = 1.0",
    "chunked-prefill-size = -1",
    'speculative-algorithm = "nextn"\nmax-running-requests = 4',
    "context-length = 32768",
    'context-length = "32Ki"',
    "watchdog-timeout = 300",
    "random-seed = 0",
]


@pytest.mark.parametrize("server", GOOD)
def test_sane_values_pass(tmp_path, server):
    assert errors(tmp_path, server + "\n") == []


@pytest.mark.parametrize("server", ["sim-time-scale = 0", "sim-time-scale = 0.1", "sim-seed = -3"])
def test_sane_sim_values_pass(tmp_path, server):
    assert errors(tmp_path, server + "\n", launcher="sim") == []


def test_ranges_follow_the_catalog_it_is_given(tmp_path):
    """A catalog where tp-size takes a string (another SGLang version) gets no integer range,
    and a flag the catalog lacks is unknown, not range-checked: the table is keyed by flag name
    and applied only where the given catalog's type is numeric."""
    data = json.loads(CATALOG.path.read_text())
    flags = {n: FlagSpec.from_json(n, d) for n, d in data["flags"].items() if n != "page-size"}
    tp = data["flags"]["tp-size"]
    flags["tp-size"] = FlagSpec.from_json("tp-size", {**tp, "type": "str"})
    other = Catalog(version="9.9.9", source="bundled", flags=flags)
    found = errors(tmp_path, "tp-size = 0\npage-size = 0\n", catalog=other)
    assert not any(e.split(": ")[1].startswith("tp-size") for e in found), found
    assert any("page-size: unknown flag for SGLang 9.9.9" in e for e in found), found
