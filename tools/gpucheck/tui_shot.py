"""Save the main screen as an SVG while an agent runs (tools/gpucheck/run.sh calls it on a GPU
host, where no terminal is attached): the GPU pane's bars and attribution as a user sees them.

    python3 tools/gpucheck/tui_shot.py STATE_DIR PROFILES_DIR OUT.svg [SECONDS]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from sgltui.tui.app import make_app, offline_svg
from sgltui.tui.source import LiveSource


async def shot(state: Path, profiles: Path, out: Path, seconds: float) -> None:
    source = LiveSource(state, profiles_dirs=[profiles], client_name="gpucheck", read_only=True)
    app = make_app(source)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(seconds)  # a few telemetry samples: the bars and the rates fill in
        out.write_text(offline_svg(app.export_screenshot()))
        print(f"screenshot: {out}")


if __name__ == "__main__":
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 6.0
    asyncio.run(shot(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), seconds))
