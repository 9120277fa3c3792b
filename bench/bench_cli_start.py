"""The CLI starts in a blink (design budgets): `sgltui --version` within 2x a bare
`python -c "import argparse"`, and `sgltui status --json` against a running agent within 2x a
bare socket client that sends the same status request and prints the reply (BARE_CLIENT below,
30 lines). Each figure is the median wall time of N runs; the ratios come from this one run.

    python bench/bench_cli_start.py [--n 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.agent_host import AgentHost  # noqa: E402

# The floor for `status --json`: a client that knows the wire and nothing else.
BARE_CLIENT = r"""
import json, socket, sys
from sgltui import __version__
from sgltui.protocol import PROTOCOL_VERSION
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
f = s.makefile("rwb")
def ask(rid, op, args):
    req = {"id": rid, "op": op, "args": args, "client": "bare"}
    f.write(json.dumps(req).encode() + b"\n")
    f.flush()
    while True:
        msg = json.loads(f.readline())
        if msg.get("id") == rid:
            return msg
ask(1, "hello", {"version": __version__, "protocol": PROTOCOL_VERSION})
reply = ask(2, "status", {})
sys.stdout.write(json.dumps(reply["result"]) + "\n")
s.close()
"""


def median_s(argv: list[str], n: int, env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def verdict(ratio: float, budget: float) -> str:
    return "met" if ratio <= budget else "OVER"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=15, help="runs per command (median)")
    args = ap.parse_args()
    py = sys.executable
    bare = median_s([py, "-c", "import argparse"], args.n)
    version = median_s([py, "-m", "sgltui", "--version"], args.n)
    r1 = version / bare
    print(f"python -c 'import argparse'   {bare * 1000:7.1f} ms")
    print(
        f"sgltui --version              {version * 1000:7.1f} ms  {r1:.2f}x  (budget 2x: "
        f"{verdict(r1, 2.0)})"
    )
    host = AgentHost(slots=1, tag="cli-start")
    try:
        host.start()
        env = {**os.environ, **host.env}
        sock = str(host.state / "agent.sock")
        floor = median_s([py, "-c", BARE_CLIENT, sock], args.n, env)
        status = median_s([py, "-m", "sgltui", "status", "--json"], args.n, env)
        r2 = status / floor
        print(f"bare socket client (status)   {floor * 1000:7.1f} ms")
        print(
            f"sgltui status --json          {status * 1000:7.1f} ms  {r2:.2f}x  (budget 2x: "
            f"{verdict(r2, 2.0)})"
        )
    finally:
        host.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
