"""The core, agent, bench and sim rooms never import Textual or the TUI (design.md, Rooms)."""

import subprocess
import sys

import pytest

ROOMS = ["sgltui.core", "sgltui.agent", "sgltui.bench", "sgltui.sim"]


@pytest.mark.parametrize("room", ROOMS)
def test_room_does_not_import_textual(room):
    import importlib
    import pkgutil

    pkg = importlib.import_module(room)
    modules = [room] + [f"{room}.{m.name}" for m in pkgutil.walk_packages(pkg.__path__, prefix="")]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(k for k in sys.modules if k == 'textual' or k.startswith('textual.') or k.startswith('sgltui.tui'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{room} pulled in {out.stdout.strip()}"
