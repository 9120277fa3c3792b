"""`sgltui agent install-service`: a systemd user unit for the agent, where systemd exists.

The keeper (agent/keeper.py) already starts the agent again when it dies; what systemd adds is a
start at boot (with `loginctl enable-linger`), before anyone logs in. Under the unit the agent
runs without a keeper (`--kept`): systemd is the keeper (Restart=on-failure, so a clean
`sgltui agent stop` stays stopped, as with the keeper). KillMode=process: stopping the unit
stops the agent alone, never the servers it runs (they would be in its control group), the way
`sgltui agent stop` leaves them running for the next agent to re-adopt.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from pathlib import Path

from sgltui.commands import CliError
from sgltui.core import locations

UNIT = "sgltui-agent.service"


def unit_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user" / UNIT


def unit_text(state_dir: Path, profiles_dirs: list[str], env: dict[str, str]) -> str:
    argv = [sys.executable, "-m", "sgltui.agent", "--state-dir", str(state_dir)]
    for d in profiles_dirs:
        argv += ["--profiles", str(Path(d).expanduser().resolve())]
    argv.append("--kept")
    lines = [
        "# written by `sgltui agent install-service`",
        "[Unit]",
        f"Description=sgltui agent ({state_dir})",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(shlex.quote(a) for a in argv),
        "Restart=on-failure",
        "RestartSec=1",
        "KillMode=process",
    ]
    # what the agent needs of this shell: where sgltui and its profiles come from
    for key in ("PYTHONPATH", "SGLTUI_STATE_DIR", "XDG_CONFIG_HOME", "CUDA_HOME", "HF_HOME"):
        if env.get(key):
            lines.append(f'Environment="{key}={env[key]}"')
    lines += ["", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def cmd_install_service(args: argparse.Namespace) -> int:
    state = locations.state_dir(args.state_dir).resolve()
    text = unit_text(state, list(args.profiles or []), dict(os.environ))
    if args.print:
        sys.stdout.write(text)
        return 0
    if shutil.which("systemctl") is None:
        raise CliError(
            "no systemd here (systemctl not found); the agent's keeper already starts it again "
            "if it dies (`sgltui agent status`); `--print` shows the unit"
        )
    path = unit_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise CliError(
            f"cannot write {path}: {exc.strerror or exc}; `--print` shows the unit"
        ) from None
    print(f"wrote {path}")
    print(
        "enable it: systemctl --user daemon-reload && systemctl --user enable --now "
        f"{UNIT.removesuffix('.service')}"
    )
    print("to start it at boot without a login: loginctl enable-linger $USER")
    return 0
