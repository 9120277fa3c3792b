"""Issue 48 item 2: one swap coordinator (agent/swap/coordinator.py). Every swap enters it (the `swap` and
`restart` ops, a pool's roll through each slot's `swap` op, the restart policy's relaunch), and
the layers it uses never call back into it: the operations (the slot's command layer) and the
standbys (their registry) know nothing of swaps."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from sgltui.agent.slot import restart_policy
from sgltui.agent.supervisor import Supervisor
from sgltui.agent.swap import coordinator as swap
from sgltui.agent.swap import operations, standby, standby_ops

AGENT = Path(swap.__file__).parent


@pytest.fixture
def sup(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLTUI_ENDPOINT_PORT", "0")
    return Supervisor(tmp_path / "state", tmp_path / "agent.sock", slot_ids=("0",))


def test_swap_and_restart_are_the_coordinator_s(sup):
    for op in ("swap", "restart"):
        assert inspect.unwrap(sup.routes[op].handler).__self__ is sup.swaps, op
    assert not hasattr(sup.ops, "op_swap") and not hasattr(sup.ops, "op_restart")
    assert not hasattr(sup.ops, "relaunch")
    # the restart policy relaunches through it too
    assert sup.restart_policy.swaps is sup.swaps
    assert "self.swaps.relaunch(" in inspect.getsource(restart_policy)


def _names(module) -> set[str]:
    """Every module imported and every attribute read in `module`'s source."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
    return out


@pytest.mark.parametrize("module", [operations, standby, standby_ops])
def test_the_layers_below_never_call_the_coordinator(module):
    names = _names(module)
    assert (
        "sgltui.agent.swap.coordinator" not in names
        and "sgltui.agent.swap.coordinator.Swaps" not in names
    )
    assert "swaps" not in names, f"{module.__name__} reaches the coordinator"
    assert not any(n.endswith("SwapRun") for n in names), f"{module.__name__} records a swap"


def test_operations_and_standbys_do_not_call_each_other_for_a_swap():
    """The warm swap's steps live in the coordinator only: no sleep/wake of a swap in
    operations.py, no swap job in standby.py or standby_ops.py."""
    ops_names = _names(operations)
    assert not {"swap_job", "wake", "release", "canary"} & ops_names
    sb_names = _names(standby) | _names(standby_ops)
    assert not {"swap_job", "_warm_swap", "_exchange", "hand_over"} & sb_names
