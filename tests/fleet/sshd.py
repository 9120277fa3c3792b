"""A real OpenSSH server for the fleet tests: 127.0.0.1 on a free port, throwaway host and user
keys in a temp dir, and local users standing for hosts.

The test users must run sgltui. The test interpreter may sit where they cannot read it (pyenv
under a 0700 /root), so the remote command is a wrapper script in a world-readable temp dir:
this interpreter when they can run it, else the system interpreter of the same minor version,
with a copy of sgltui and of its dependencies' files (importlib.metadata's closure of the
`dependencies`; compiled modules keep working within one CPython minor version).
"""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)


def unavailable() -> str | None:
    """Why these tests cannot run here, or None."""
    if SSHD is None:
        return "no OpenSSH server (sshd): apt-get install openssh-server (.ci/run does)"
    for tool in ("ssh", "ssh-keygen", "useradd", "userdel", "usermod", "runuser"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (openssh-client, passwd, util-linux)"
    if os.geteuid() != 0:
        return "the fleet tests create local users (useradd) and run sshd: they need root"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class User:
    name: str
    home: Path
    state_dir: Path


@dataclass
class Sshd:
    root: Path
    port: int
    proc: subprocess.Popen
    ssh_config: Path
    sgltui: Path  # the wrapper the test users run
    users: list[User] = field(default_factory=list)

    def fleet_toml(self, path: Path, names: list[str] | None = None, **extra: str) -> Path:
        lines = ["[ssh]", f'options = ["-F", "{self.ssh_config}"]', ""]
        for i, u in enumerate(self.users):
            name = (names or [])[i] if names and i < len(names) else f"h{i + 1}"
            lines += [
                "[[host]]",
                f'name = "{name}"',
                f'ssh = "{u.name}@127.0.0.1"',
                f'sgltui = "{extra.get("sgltui", self.sgltui)}"',
            ]
            if "address" in extra:  # where the other hosts reach its servers (cross-host pools)
                lines.append(f'address = "{extra["address"]}"')
            lines.append("")
        lines.append(extra.get("tail", ""))  # more tables: [[pool]]
        path.write_text("\n".join(lines))
        return path


def _closure() -> list[md.Distribution]:
    """sgltui's installed dependencies and theirs (markers evaluated loosely: what is
    installed is copied)."""
    seen: dict[str, md.Distribution] = {}
    # The fleet extra too (smg, the pool gateway), where it is installed: a host's agent runs
    # a cross-host pool's gateway.
    todo = [
        re.split(r"[ ;<>=!~\[]", r, maxsplit=1)[0]
        for r in (md.requires("sgltui") or [])
        if "extra ==" not in r or "extra == 'fleet'" in r
    ]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen or not name:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        for r in dist.requires or []:
            if "extra ==" in r:
                continue
            todo.append(re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0])
    return list(seen.values())


def _readable_by(user: str, path: str) -> bool:
    r = subprocess.run(
        ["runuser", "-u", user, "--", "test", "-x", path], capture_output=True, timeout=10
    )
    return r.returncode == 0


def remote_python(root: Path, probe_user: str) -> tuple[str, list[Path]]:
    """(interpreter, PYTHONPATH) the test users can run sgltui with; copies into root/py."""
    site = root / "py"
    site.mkdir()
    # sgltui itself, always: the checkout may be unreadable to them, and a copy pins the code.
    pkg = site / "sgltui"
    shutil.copytree(REPO / "sgltui", pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for shipped in ("profiles", "themes"):
        if (REPO / shipped).is_dir():
            shutil.copytree(REPO / shipped, site / shipped)
    if _readable_by(probe_user, sys.executable):
        return sys.executable, [site]
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(minor, path="/usr/bin:/usr/local/bin")
    if system is None:
        raise RuntimeError(
            f"the test users cannot run {sys.executable} and there is no /usr/bin/{minor}"
        )
    deps = site / "deps"
    deps.mkdir()
    for dist in _closure():
        for f in dist.files or []:
            src = Path(str(dist.locate_file(f)))
            if ".." in f.parts or not src.is_file() or src.suffix == ".pyc":
                continue
            dst = deps / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)  # smg alone is ~100 MB: a link where the disk allows
            except OSError:
                shutil.copy2(src, dst)
    return system, [site, deps]


def start(n_users: int = 2) -> Sshd:
    """sshd on 127.0.0.1 with `n_users` fresh users; stop() undoes everything (the temp dir
    included). The temp dir is under /tmp, 0755: the users' sshd reads their keys there and
    they run the copied sgltui from it (pytest's tmp_path is 0700 root)."""
    root = Path(tempfile.mkdtemp(prefix="sgltui-sshd-"))
    os.chmod(root, 0o755)
    keys = root / "keys"
    keys.mkdir(mode=0o700)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "host")], check=True
    )
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "user")], check=True
    )
    tag = secrets.token_hex(3)
    users: list[User] = []
    sshd: Sshd | None = None
    try:
        for i in range(n_users):
            name = f"sgf{tag}{i + 1}"
            home = root / "home" / name
            home.parent.mkdir(exist_ok=True)
            os.chmod(home.parent, 0o755)
            subprocess.run(
                ["useradd", "-m", "-d", str(home), "-s", "/bin/sh", name],
                check=True,
                capture_output=True,
            )
            # sshd refuses a locked account ('!' in shadow) even with a key: '*' is no password.
            subprocess.run(["usermod", "-p", "*", name], check=True, capture_output=True)
            users.append(User(name, home, home / ".local" / "state" / "sgltui"))
        pub = (keys / "user.pub").read_text()
        auth = root / "authorized_keys"
        auth.write_text(pub)
        os.chmod(auth, 0o644)
        python, path = remote_python(root, users[0].name)
        wrapper = root / "bin" / "sgltui"
        wrapper.parent.mkdir()
        pp = ":".join(str(p) for p in path)
        wrapper.write_text(f'#!/bin/sh\nexport PYTHONPATH={pp}\nexec {python} -m sgltui "$@"\n')
        os.chmod(wrapper, 0o755)
        for d in (root / "bin", root / "py"):
            for p in [d, *d.rglob("*")]:
                os.chmod(p, (0o755 if p.is_dir() or os.access(p, os.X_OK) else 0o644))
        # Debian's sshd needs its privilege separation directory (made at boot by its unit).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        port = free_port()
        cfg = root / "sshd_config"
        cfg.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
            f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {auth}\n"
            "UsePAM no\nStrictModes no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            f"AllowUsers {' '.join(u.name for u in users)}\n"
            "PrintMotd no\nPrintLastLog no\nMaxStartups 50\nMaxSessions 50\n"
            f"LogLevel {os.environ.get('SGLTUI_TEST_SSHD_LOG', 'ERROR')}\n"
        )
        known = root / "known_hosts"
        hostpub = (keys / "host.pub").read_text().split()
        known.write_text(f"[127.0.0.1]:{port} {hostpub[0]} {hostpub[1]}\n")
        client_cfg = root / "ssh_config"
        client_cfg.write_text(
            f"Host 127.0.0.1\n  Port {port}\n  IdentityFile {keys / 'user'}\n"
            f"  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
        )
        # -D: stays in the foreground (our child, its own process group); -e: log to stderr.
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(cfg)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(root / "sshd.log", "wb"),  # noqa: SIM115 - lives as long as sshd
            start_new_session=True,
        )
        sshd = Sshd(root, port, proc, client_cfg, wrapper, users)
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshd did not start: {(root / 'sshd.log').read_text()[-500:]}")
            time.sleep(0.05)
        return sshd
    except BaseException:
        if sshd is not None:
            stop(sshd)
        else:
            _remove_users(users)
            shutil.rmtree(root, ignore_errors=True)
        raise


def stop_agents(s: Sshd) -> None:
    """Each user's agent and servers, stopped by that user's own sgltui."""
    for u in s.users:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                ["runuser", "-u", u.name, "--", str(s.sgltui), "agent", "stop", "--stop-servers"],
                capture_output=True,
                timeout=60,
                cwd="/",
            )


def stop(s: Sshd) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(s.proc.pid, signal.SIGTERM)
    try:
        s.proc.wait(5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(s.proc.pid, signal.SIGKILL)
        s.proc.wait()
    _remove_users(s.users)
    shutil.rmtree(s.root, ignore_errors=True)


def _remove_users(users: list[User]) -> None:
    for u in users:
        # Anything the user still runs (an agent that would not stop) goes first: userdel
        # refuses a logged-in user.
        with contextlib.suppress(KeyError):
            uid = pwd.getpwnam(u.name).pw_uid
            for p in psutil.process_iter(["uids"]):
                if p.info["uids"] and p.info["uids"].real == uid:
                    with contextlib.suppress(psutil.Error):
                        p.kill()
        subprocess.run(["userdel", "-r", "-f", u.name], capture_output=True)
        shutil.rmtree(u.home, ignore_errors=True)
