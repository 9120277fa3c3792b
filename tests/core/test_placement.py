"""host.toml: slots on GPUs, pools, ports (sgltui/core/placement.py)."""

from __future__ import annotations

import pytest

from sgltui.core import placement
from sgltui.core.placement import PlacementError

TWO = """
[[slot]]
name = "a"
gpus = [0]
[[slot]]
name = "b"
gpus = [1]
[[pool]]
name = "all"
slots = ["a", "b"]
port = 30080
"""


def test_two_slots_one_pool_with_assigned_ports_outside_each_others_dp_range():
    p = placement.parse(TWO, gpu_count=2)
    a, b = p.slots
    assert (a.gpus, b.gpus) == ((0,), (1,))
    assert a.cuda_visible_devices == "0"
    assert p.pool("all").endpoint == "http://127.0.0.1:30080"
    assert not (a.footprint() & b.footprint())
    assert 30080 not in a.footprint() | b.footprint()
    assert p.pool_of("b").name == "all"
    # Written out and read back: the same placement.
    assert placement.parse(p.to_toml(), gpu_count=2) == p


def test_many_slots_get_ports_that_never_meet_a_dp_attention_range():
    ports = placement.assign_ports([(f"s{i}", None) for i in range(64)], {30080: "pool"})
    spans = [placement.footprint(v) for v in ports.values()]
    for i, s in enumerate(spans):
        for t in spans[i + 1 :]:
            assert not (s & t)
        assert 30080 not in s


def _bad(text: str, gpu_count: int | None = 2) -> str:
    with pytest.raises(PlacementError) as err:
        placement.parse(text, gpu_count=gpu_count)
    msg = str(err.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize(
    ("text", "gpus", "says"),
    [
        (TWO.replace("gpus = [1]", "gpus = [3]"), 2, "GPU 3 does not exist"),
        (TWO.replace("gpus = [1]", "gpus = [0]"), 2, "share GPU 0"),
        (TWO.replace('["a", "b"]', '["a", "c"]'), 2, "unknown slot 'c'"),
        (TWO.replace('name = "b"', 'name = "a"'), 2, "two slots are named 'a'"),
        (TWO + '[[pool]]\nname = "e"\nslots = []\nport = 1\n', 2, "slots = []"),
        (
            TWO.replace('slots = ["a", "b"]', 'slots = ["a"]')
            + '[[pool]]\nname = "all"\nslots = ["b"]\nport = 30081\n',
            2,
            "two pools are named 'all'",
        ),
        (
            TWO.replace('slots = ["a", "b"]', 'slots = ["a"]')
            + '[[pool]]\nname = "x"\nslots = ["b"]\nport = 30080\n',
            2,
            "both use port 30080",
        ),
        (TWO.replace("gpus = [0]", "gpus = [0]\nport = 30080"), 2, "clashes with pool all"),
        (
            TWO.replace("gpus = [0]", "gpus = [0]\nport = 31000").replace(
                "gpus = [1]", "gpus = [1]\nport = 31233"
            ),
            2,
            "DP-attention ports 31233-31240",
        ),
        (TWO + '[[pool]]\nname = "y"\nslots = ["a"]\nport = 1\n', 2, "is in pools"),
        ("[[pool]]\nname='x'\nslots=[]\nport=1\n", 2, "no [[slot]]"),
        (TWO.replace("[[slot]]", "[[slots]]", 1), 2, "unknown key 'slots'"),
        (TWO.replace("gpus = [1]", 'gpus = ["1"]'), 2, "list of GPU indices"),
        ("slot = [", 2, "not valid TOML"),
        ("simulated_gpus = 1\n" + TWO, None, "GPU 1 does not exist"),
        (TWO + 'policy = "fastest"\n', 2, "policy = 'fastest'"),
    ],
)
def test_each_bad_host_file_is_one_line_naming_the_fix(text, gpus, says):
    msg = _bad(text, gpus)
    assert says in msg, msg
    assert ";" in msg  # problem; fix


def test_gpu_count_unknown_skips_the_existence_check_but_not_sharing():
    assert placement.parse(TWO.replace("gpus = [1]", "gpus = [7]"), gpu_count=None)
    _bad(TWO.replace("gpus = [1]", "gpus = [0]"), None)


def test_simulated_host_sets_the_gpu_count():
    p = placement.parse('simulated_gpus = 4\nsimulated_gpu = "h200-141gb"\n' + TWO, gpu_count=0)
    assert p.simulated_gpus == 4 and p.simulated_gpu == "h200-141gb"


def test_layout_one_slot_per_gpu_or_per_tp_group():
    p = placement.layout(8, tp=2)
    assert [s.gpus for s in p.slots] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert p.pools[0].slots == ("a", "b", "c", "d")
    assert placement.parse(p.to_toml(), gpu_count=8) == p
    with pytest.raises(PlacementError, match="divides 8"):
        placement.layout(8, tp=3)
    with pytest.raises(PlacementError, match="simulated-gpus"):
        placement.layout(0)
    sim = placement.layout(2, simulated=True, simulated_gpu="h100-80gb")
    assert "simulated_gpus = 2" in sim.to_toml()


def test_load_without_a_file_is_today_single_slot(tmp_path):
    assert placement.load(tmp_path / "host.toml") is None
    (tmp_path / "host.toml").write_text(TWO)
    p = placement.load(tmp_path / "host.toml", gpu_count=2)
    assert p is not None and p.path == tmp_path / "host.toml"
    with pytest.raises(PlacementError, match="no slot 'z'.*slots: a, b"):
        p.slot("z")


def test_a_profile_on_a_slot():
    p = placement.parse(TWO, gpu_count=2)
    b = p.slot("b")
    server, env = placement.apply_to(
        {"port": 30000, "tp-size": 1}, {"CUDA_VISIBLE_DEVICES": "0"}, b
    )
    assert server["port"] == b.port and env["CUDA_VISIBLE_DEVICES"] == "1"
    notes = placement.overrides({"port": 30000}, {"CUDA_VISIBLE_DEVICES": "0"})
    assert len(notes) == 2 and "host.toml" in notes[0]
    assert placement.tp_problem("x", {"tp-size": 1}, b) is None
    msg = placement.tp_problem("x", {"tp-size": 2}, b)
    assert msg and "needs 2 GPUs" in msg and "tp-size = 1" in msg and "--tp 2" in msg
    assert placement.gpus_needed({"tp-size": 2, "dp-size": 2, "enable-dp-attention": True}) == 2
    assert placement.gpus_needed({"tp-size": 2, "dp-size": 2}) == 4


def test_describe_names_each_slot_and_pool():
    lines = placement.describe(placement.parse(TWO, gpu_count=2))
    assert lines[0].startswith("slot a") and "pool all" in lines[0]
    assert "gateway (smg)" in lines[-1] and "http://127.0.0.1:30080" in lines[-1]


@pytest.mark.slow
def test_host_init_show_and_validate_as_a_user(tmp_path):
    from tests.fixtures.cli import sgltui

    r = sgltui("host", "show")
    assert r.returncode == 0 and "one slot, as before" in r.stdout
    r = sgltui("host", "init", "--simulated-gpus", "2")
    assert r.returncode == 0, r.stderr
    assert "slot a" in r.stdout and "slot b" in r.stdout and "pool all" in r.stdout
    r = sgltui("host", "init", "--simulated-gpus", "2")
    assert r.returncode == 1 and "--force" in r.stderr and len(r.stderr.splitlines()) == 1
    r = sgltui("host", "show")
    assert r.returncode == 0 and "simulated host: 2 GPUs" in r.stdout
    r = sgltui("profiles", "validate", "no-mtp")
    assert "port = 30000 is replaced by each slot's port" in r.stdout
    host = tmp_path / "config" / "sgltui" / "host.toml"
    host.write_text(host.read_text().replace("gpus = [1]", "gpus = [0]"))
    r = sgltui("host", "show")
    assert r.returncode == 1 and "share GPU 0" in r.stderr and len(r.stderr.splitlines()) == 1
    r = sgltui("host", "init", "--simulated-gpus", "3", "--tp", "2", "--force")
    assert r.returncode == 1 and "divides 3" in r.stderr
