"""No room but tui/ imports Textual or the TUI, and jobs/ never the agent, the simulator or the
commands: every module of every room, subpackages included (agent/telemetry/, ...), is imported in
a fresh interpreter and the modules it pulled in are checked. Layering between our own rooms is
also checked statically by `lint-imports` (pyproject)."""

import importlib
import importlib.util
import pkgutil
import subprocess
import sys

import pytest

ROOMS = [
    "sgltui.core",
    "sgltui.protocol",
    "sgltui.session",
    "sgltui.agent",
    "sgltui.bench",
    "sgltui.jobs",
    "sgltui.sim",
]
# What a room must not pull in besides Textual and the TUI.
ALSO_FORBIDDEN = {"sgltui.jobs": ("sgltui.agent", "sgltui.sim", "sgltui.commands")}


def modules_of(room: str) -> list[str]:
    spec = importlib.util.find_spec(room)
    assert spec is not None, room
    if spec.submodule_search_locations is None:  # a plain module (protocol.py)
        return [room]
    found = [room]
    # prefix makes walk_packages import subpackages by their full name, so it recurses into them.
    for info in pkgutil.walk_packages(spec.submodule_search_locations, prefix=f"{room}."):
        found.append(info.name)
    return found


def test_subpackages_are_walked():
    assert "sgltui.agent.gpu.nvml" in modules_of("sgltui.agent")


@pytest.mark.parametrize("room", ROOMS)
def test_room_does_not_import_textual(room):
    modules = modules_of(room)
    forbidden = ("textual", "sgltui.tui", *ALSO_FORBIDDEN.get(room, ()))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        f"bad = sorted(k for k in sys.modules if any(k == p or k.startswith(p + '.') for p in {forbidden!r}))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{room} pulled in {out.stdout.strip()}"
