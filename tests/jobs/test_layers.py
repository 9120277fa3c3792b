"""sgltui/jobs/ imports core, protocol and the bench's load generator: never the agent or the TUI."""

import subprocess
import sys


def test_jobs_room_imports_no_agent_no_tui():
    code = (
        "import importlib, pkgutil, sys\n"
        "import sgltui.jobs as pkg\n"
        "for m in pkgutil.walk_packages(pkg.__path__, prefix='sgltui.jobs.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] == 'textual'\n"
        "             or k.startswith(('sgltui.agent', 'sgltui.tui', 'sgltui.sim', 'sgltui.commands')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"sgltui.jobs pulled in {out.stdout.strip()}"
