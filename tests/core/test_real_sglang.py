"""Every bundled SGLang profile is a command line that the real SGLang parser accepts.

Needs an interpreter with SGLang: $SGLTUI_SGLANG_PYTHON, else /tmp/sglang-cpu-env/bin/python (built
by tools/sglang-cpu-env.sh), else this interpreter if it imports sglang. Skipped, saying
so, when there is none. The same run checks that the bundled catalog is what
tools/gen_flag_catalog.py would generate from that SGLang today.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sgltui.core.flags import EXTRACTOR_PATH, load_bundled_catalog
from sgltui.core.profiles import load_profiles

CANDIDATES = [os.environ.get("SGLTUI_SGLANG_PYTHON"), "/tmp/sglang-cpu-env/bin/python"]

CHECK = r"""
import argparse, importlib.util, json, sys, warnings
warnings.simplefilter("ignore")
from sglang.srt.server_args import ServerArgs
request = json.load(sys.stdin)
results = {}
for name, argv in request["profiles"].items():
    parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    try:
        ns, extra = parser.parse_known_args(argv)
        results[name] = "unrecognized: " + " ".join(extra) if extra else "ok"
    except (argparse.ArgumentError, SystemExit) as exc:
        results[name] = "rejected: " + str(exc)
spec = importlib.util.spec_from_file_location("extract", request["extractor"])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("RESULT " + json.dumps({"profiles": results, "catalog": module.extract()}))
"""


def _sglang_python() -> str | None:
    for candidate in CANDIDATES:
        if candidate and Path(candidate).exists():
            return candidate
    if importlib.util.find_spec("sglang") is not None:
        return sys.executable
    return None


PYTHON = _sglang_python()


@pytest.mark.skipif(
    PYTHON is None,
    reason="SGLang is not importable here (set SGLTUI_SGLANG_PYTHON or build "
    "/tmp/sglang-cpu-env with tools/sglang-cpu-env.sh); "
    "bundled profiles not checked against the real parser",
)
def test_bundled_profiles_parse_with_real_sglang_and_catalog_is_current():
    profiles = {n: p.flag_argv() for n, p in load_profiles().items() if p.launcher == "sglang"}
    assert len(profiles) >= 5
    env = dict(os.environ, PYTHONPATH="")  # the SGLang env must not see this checkout's packages
    proc = subprocess.run(
        [PYTHON, "-c", CHECK],
        input=json.dumps({"profiles": profiles, "extractor": str(EXTRACTOR_PATH)}),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        start_new_session=True,
    )
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-2000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["profiles"] == {name: "ok" for name in profiles}
    live = result["catalog"]
    bundled = load_bundled_catalog()
    if live["sglang_version"] != bundled.version:
        pytest.skip(
            f"SGLang {live['sglang_version']} here; the bundled catalog is for {bundled.version}"
        )
    stale = json.loads(Path(bundled.path).read_text())
    assert live == stale, (
        "bundled catalog is out of date: run tools/gen_flag_catalog.py with this SGLang"
    )
