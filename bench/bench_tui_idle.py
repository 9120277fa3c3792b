"""Idle CPU of the TUI with every pane live at 1 Hz, against a bare Textual app ticking a clock.

Budget (design.md): within 1.5x of the bare app, measured in the same run. Both apps run in a
real pseudo-terminal (the real driver, real escape codes written), 120x40, as the user sees
them; the sgltui app is fed by a scripted source that pushes a sample, a log line and (every
few seconds) an event each second, so GPU/RAM bars, the chart, the log and the activity pane all
redraw. Rounds alternate bare/app so background load on the machine hits both alike.

    python bench/bench_tui_idle.py [--seconds 15] [--rounds 2] [--warmup 3]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

BUDGET = 1.5
ROOT = Path(__file__).resolve().parent.parent


def run_child(mode: str) -> None:
    """The measured process: `bare` (a clock ticking at 1 Hz) or `app` (sgltui, all panes live)."""
    if mode == "bare":
        from textual.app import App
        from textual.widgets import Static

        class Clock(App):
            def compose(self):
                yield Static(id="clock")

            def on_mount(self):
                self.set_interval(1.0, self.tick)

            def tick(self):
                self.query_one("#clock", Static).update(time.strftime("%H:%M:%S"))

        Clock().run()
        return
    from sgltui.tui.app import make_app
    from sgltui.tui.scripted import ScriptedSource, make_status

    # "app-static": the same screen with nothing arriving, to split layout cost from update cost.
    source = ScriptedSource(make_status(), live_interval=1.0 if mode == "app" else None)
    # Events come from this TUI's own client: a command from another client pops a notification,
    # which is not what an idle screen does every few seconds.
    app = make_app(source, own_client="tui:1@bench")

    async def events() -> None:
        import asyncio

        n = 0
        while True:
            await asyncio.sleep(3.0)
            n += 1
            source.feed(
                {
                    "push": "event",
                    "data": {
                        "v": 1,
                        "ts": time.time(),
                        "type": "command",
                        "client": "tui:1@bench",
                        "slot": "0",
                        "op": "status",
                        "args": {"n": n},
                    },
                }
            )

    if mode == "app":
        app.call_later(lambda: app.run_worker(events(), exit_on_error=False))
    app.run()


def measure(mode: str, seconds: float, warmup: float) -> float:
    """CPU seconds the child used per wall second, after warmup."""
    import psutil

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", PYTHONPATH=str(ROOT))
    env.pop("TEXTUAL", None)
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", mode],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    stop = threading.Event()

    def drain() -> None:  # a terminal that reads everything, so the app never blocks on output
        while not stop.is_set():
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        p = psutil.Process(proc.pid)
        time.sleep(warmup)
        c0 = sum(p.cpu_times()[:2])
        t0 = time.monotonic()
        time.sleep(seconds)
        c1 = sum(p.cpu_times()[:2])
        t1 = time.monotonic()
        if proc.poll() is not None:
            raise SystemExit(
                f"the {mode} app exited early (code {proc.returncode}); run it by hand to see why"
            )
        return (c1 - c0) / (t1 - t0)
    finally:
        stop.set()
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--seconds", type=float, default=15.0, help="measured seconds per round (default 15)"
    )
    ap.add_argument("--rounds", type=int, default=2, help="alternating bare/app rounds (default 2)")
    ap.add_argument(
        "--warmup", type=float, default=3.0, help="seconds to let each app start first (default 3)"
    )
    ap.add_argument("--child", choices=("bare", "app", "app-static"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run_child(args.child)
        return 0
    bare: list[float] = []
    app: list[float] = []
    static: list[float] = []
    for r in range(args.rounds):
        bare.append(measure("bare", args.seconds, args.warmup))
        app.append(measure("app", args.seconds, args.warmup))
        static.append(measure("app-static", args.seconds, args.warmup))
        print(
            f"round {r + 1}: bare clock {bare[-1] * 100:5.2f}%   sgltui all panes live {app[-1] * 100:5.2f}%   "
            f"sgltui, nothing arriving {static[-1] * 100:5.2f}%  (CPU of one core)"
        )
    b, a, s = sum(bare) / len(bare), sum(app) / len(app), sum(static) / len(static)
    print(f"sgltui with nothing arriving (the screen alone):     {s * 100:.2f}% of one core")
    ratio = a / b if b > 0 else float("inf")
    print(f"baseline (bare Textual app ticking a clock at 1 Hz): {b * 100:.2f}% of one core")
    print(f"sgltui idle, every pane live at 1 Hz:                {a * 100:.2f}% of one core")
    verdict = "within" if ratio <= BUDGET else "OVER"
    print(f"ratio {ratio:.2f}x  ({verdict} the {BUDGET}x budget)")
    return 0 if ratio <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
