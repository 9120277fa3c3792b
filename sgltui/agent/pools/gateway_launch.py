"""`python -m sgltui.agent.pools.gateway_launch KEYFILE -- SMG-ARGS...`: smg launch, keys kept out of argv.

smg takes its API key and control-plane keys only as flags (no file, no environment variable
in smg 1.13), and any user of the host can read a process's argv in /proc. So the agent starts
this wrapper instead: it reads the keys from the agent's 0600 file and hands smg's own CLI
entry point the full argument list inside this process; /proc shows the wrapper's argv, with the
file's path but no key.
"""

from __future__ import annotations

import json
import sys

# The fix first: a pool's row in the TUI cuts the end of a long line.
SMG = "no gateway:"  # how each line that says smg cannot be had begins
NOT_INSTALLED = f"{SMG} pip install smg (SGLang's gateway, for pools of 2+ slots)"
CONTROL_PLANE_ID = "sgltui"  # the key's id and name in smg's 'id:name:role:key'


def secret_args(keys: dict[str, str]) -> list[str]:
    args = []
    cp = keys.get("control_plane_key")
    if cp:
        args += ["--control-plane-api-keys", f"{CONTROL_PLANE_ID}:{CONTROL_PLANE_ID}:admin:{cp}"]
    api = keys.get("api_key")
    if api:
        args += ["--api-key", api]
    return args


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        print(
            "usage: python -m sgltui.agent.pools.gateway_launch KEYFILE -- SMG-ARGS...",
            file=sys.stderr,
        )
        return 2
    try:
        with open(argv[0], encoding="utf-8") as fh:
            keys = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"gateway: cannot read its keys from {argv[0]}: {exc}", file=sys.stderr)
        return 2
    try:
        from smg.cli import main as smg_main
    except ImportError:
        print(NOT_INSTALLED, file=sys.stderr)
        return 3
    smg_main(["launch", *argv[2:], *secret_args(keys)])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
