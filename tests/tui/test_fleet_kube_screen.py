"""The fleet's main screen on a mixed fleet (issue 50): a selector's pods beside SSH hosts, one
pod whose exec RBAC refuses. The reachable hosts are scripted (tests/tui/fleet_fakes.py); the
refused pod is a real link through the fake kubectl (tests/fleet/fake_kubectl.py), so its
reason is the one kubectl's failure really gives."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from textual.content import Content

from sgltui.fleet import config as fleet_config
from sgltui.fleet.link import HostLink
from sgltui.tui.fleetsource import FleetSource
from sgltui.tui.widgets.hosts import HostsPane
from sgltui.tui.widgets.slots import SlotsPane
from tests.support.scripted import make_host_status

from .fleet_fakes import FakeLink
from .helpers import app_with, notes_into, until

# slow: the refused pod is a real kubectl (fake) run, ~3.5 s on a busy machine
pytestmark = [pytest.mark.usefixtures("utc"), pytest.mark.slow]
FAKE = Path(__file__).parents[1] / "fleet" / "fake_kubectl.py"
PODS = [f"sgltui-{i}" for i in range(4)]


def forbidden_pod(tmp_path: Path, monkeypatch) -> tuple[fleet_config.Fleet, fleet_config.Host]:
    """Pod sgltui-3 of host k's selector, whose `pods/exec` the (fake) cluster refuses."""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    kubectl.chmod(0o755)
    pods = [{"name": p, "namespace": "ml", "labels": {"app": "sgltui"}} for p in PODS]
    cfg = tmp_path / "kube.json"
    cfg.write_text(json.dumps({"root": str(tmp_path), "pods": pods, "forbidden": ["sgltui-3"]}))
    monkeypatch.setenv("FAKE_KUBE", str(cfg))
    host = {"name": "k.sgltui-3", "kind": "kubernetes", "namespace": "ml", "pod": "sgltui-3"}
    fleet = fleet_config.parse({"host": [{**host, "kubectl": str(kubectl)}]}, tmp_path / "f.toml")
    return fleet, fleet.host("k.sgltui-3")


async def test_pods_beside_ssh_hosts_and_a_refused_pods_one_line_reason(tmp_path, monkeypatch):
    fleet, refused = forbidden_pod(tmp_path, monkeypatch)
    calls: list = []
    links: list = []
    for pod in PODS[:3]:
        link = FakeLink(f"k.{pod}", make_host_status(1, pool=None), calls)
        link.state.ssh = f"pod {pod} in ml"  # what a pod's link says it is (Host.target)
        links.append(link)
    links += [FakeLink(h, make_host_status(1, pool=None), calls) for h in ("gpu1", "gpu2")]
    links.append(HostLink(fleet, refused, interval_s=60))  # a real link: kubectl refuses it
    src = FleetSource(links)
    app = app_with(src)
    said: list[str] = []
    async with app.run_test(size=(120, 40), message_hook=notes_into(said)) as pilot:
        await until(pilot, lambda: said, timeout=15)  # the refused pod says why, once
        await until(pilot, lambda: len(app.model.slots) == 5)
        await until(pilot, lambda: "unreachable" in app.query_one(HostsPane).text)
        hosts = app.query_one(HostsPane).text
        await pilot.pause(0.3)
        rows = app.query_one(SlotsPane)
        top = str(app.query_one("#topbar").render())  # type: ignore[arg-type]
    await src.close()

    # Every host on its own line, the pods told apart by name (not all "k.sgltu…").
    lines = [Content.from_markup(x).plain for x in hosts.splitlines()]
    assert len(lines) == 6
    for name in ("k.sgltui-0", "k.sgltui-1", "k.sgltui-2", "gpu1", "gpu2"):
        (line,) = [x for x in lines if f" {name} " in x]
        assert "● 1 GPU  1/1 slots" in line, line
    (down,) = [x for x in lines if " k.sgltui-3 " in x]
    assert "○ unreachable since" in down and "retrying" in down
    assert "5/6 hosts reachable" in top, top
    # Its reason, one line: which host, which pod, what kubectl said and what to do.
    (note,) = said
    assert "\n" not in note
    assert note.startswith("host k.sgltui-3 (pod sgltui-3 in ml): kubectl is not allowed to "
                           "create pods/exec"), note  # fmt: skip
    assert "ask for a Role with create pods/exec in ml" in note
    # The slots view names each pod's slot apart too (cut in the middle, its end kept).
    assert app.model.slot_ids[:3] == [f"k.sgltui-{i}/a" for i in range(3)]
    shown = [Content.from_markup(str(o.prompt)).plain for o in rows.options]
    for i in range(3):
        assert sum(f" k.s…-{i}/a " in row for row in shown) == 1, shown
