"""A stand-in for kubectl (and for ssh) in the fleet's Kubernetes tests: no cluster, but each
"pod" runs the real command (`sgltui agent bridge`: a real agent per pod) with a state and
config directory of its own. What the cluster says is in the JSON file $FAKE_KUBE:

    {"root": DIR, "pods": [{"name", "namespace", "labels", "podIP"}], "unreachable": [CONTEXT],
     "forbidden": ["POD" whose exec RBAC refuses], "forbid_list": false}

Run as `fake_kubectl.py [--context C] [--namespace NS] get pods -l SEL -o json` or
`... exec -i POD [-c C] -- WORDS`; as `fake_kubectl.py ssh [OPTIONS] DEST -- REMOTE` it is ssh
(the remote string run by /bin/sh, the "host" named by DEST).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _env(root: Path, name: str) -> dict[str, str]:
    env = dict(os.environ)
    env["SGLTUI_STATE_DIR"] = str(root / name / "state")
    env["XDG_CONFIG_HOME"] = str(root / name / "config")
    env["SGLTUI_SIM_GPU_DIR"] = str(root / name / "simgpu")  # each pod's own simulated GPUs
    env.pop("FAKE_KUBE", None)
    return env


def main(argv: list[str]) -> int:
    cfg = json.loads(Path(os.environ["FAKE_KUBE"]).read_text())
    root = Path(cfg["root"])
    with open(root / "calls.log", "a") as log:  # what the tests ask: was kubectl run, and how
        log.write(json.dumps(argv) + "\n")
    if argv and argv[0] == "ssh":
        i = argv.index("--")
        dest = argv[i - 1].replace("@", "_")
        os.execve("/bin/sh", ["/bin/sh", "-c", argv[i + 1]], _env(root, dest))
    ns, context = "default", None
    while argv and argv[0] in ("--context", "--namespace"):
        if argv[0] == "--namespace":
            ns = argv[1]
        else:
            context = argv[1]
        argv = argv[2:]
    if context in cfg.get("unreachable", []):
        print(
            "Unable to connect to the server: dial tcp 10.9.9.9:6443: i/o timeout",
            file=sys.stderr,
        )
        return 1
    pods = [p for p in cfg.get("pods", []) if p.get("namespace", "default") == ns]
    if argv[:2] == ["get", "pods"]:
        if cfg.get("forbid_list"):
            print(
                'Error from server (Forbidden): pods is forbidden: User "alice" cannot list '
                f'resource "pods" in API group "" in the namespace "{ns}"',
                file=sys.stderr,
            )
            return 1
        want = dict(kv.split("=", 1) for kv in argv[argv.index("-l") + 1].split(","))
        items = [
            {
                "metadata": {"name": p["name"], "namespace": ns, "labels": p.get("labels", {})},
                "status": {"podIP": p.get("podIP"), "phase": "Running"},
            }
            for p in pods
            if all(p.get("labels", {}).get(k) == v for k, v in want.items())
        ]
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        return 0
    if argv[0] == "exec":
        pod = argv[2]
        if pod in cfg.get("forbidden", []):
            print(
                f'Error from server (Forbidden): pods "{pod}" is forbidden: User "alice" cannot '
                f'create resource "pods/exec" in API group "" in the namespace "{ns}"',
                file=sys.stderr,
            )
            return 1
        if pod not in [p["name"] for p in pods]:
            print(f'Error from server (NotFound): pods "{pod}" not found', file=sys.stderr)
            return 1
        words = argv[argv.index("--") + 1 :]
        os.execve(words[0], words, _env(root, pod))
    print(f"error: unknown command {argv[:1]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
