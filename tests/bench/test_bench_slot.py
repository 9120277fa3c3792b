"""`sgltui bench` without --slot on an agent of one slot named otherwise than "0" (a demo's own
host on a busy machine names it "a"): the sweep failed every point with "no slot '0'" (seen in
tmux while trying issue 51 item 9). It benches the agent's only slot."""

from __future__ import annotations

from sgltui.commands.bench import default_slot


def test_a_bench_without_slot_uses_the_agents_only_slot():
    assert default_slot(["a"]) == "a"
    assert default_slot(["0"]) == "0"
    assert default_slot(["a", "b"]) == "0"  # several: the agent's answer names them
    assert default_slot([]) == "0"
