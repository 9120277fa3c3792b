"""Run the load generator as a real process and collect its JSON lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_loadgen(config: dict, records: Path, timeout: float = 60.0) -> tuple[int, list[dict]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sgltui.bench.loadgen",
            "--config-json",
            json.dumps(config),
            "--records",
            str(records),
        ],
        capture_output=True,
        timeout=timeout,
        start_new_session=True,
        check=False,
    )
    lines = [json.loads(x) for x in proc.stdout.decode().splitlines() if x.strip()]
    return proc.returncode, lines
