"""How a host is reached: ssh (fleet/ssh.py) or `kubectl exec` (fleet/kube.py), by its kind.

Every fleet command goes through here, so a fleet may mix both: the link, its timeouts, its
hang-up handling and the fan-out caps are the same for each (fleet/client.py, fleet/link.py).
"""

from __future__ import annotations

from sgltui.fleet import kube, ssh
from sgltui.fleet.config import Fleet, Host


def argv(fleet: Fleet, host: Host, *words: str, tty: bool = False) -> list[str]:
    if host.kube:
        return kube.argv(host, *words, tty=tty)
    return ssh.argv(fleet, host, *words, tty=tty)


def bridge_argv(fleet: Fleet, host: Host) -> list[str]:
    return argv(fleet, host, "agent", "bridge")


def not_listed(host: Host) -> str | None:
    """Why a host cannot be reached at all (a selector that listed no pod), else None."""
    if host.kube and not host.pod:
        return host.pods_error or (
            f"host {host.name}: selector {host.selector} was not listed; start sgltui again"
        )
    return None


def failed(host: Host, returncode: int | None, stderr: str) -> bool:
    """The transport (ssh, kubectl) failed, not the far sgltui: explain() has its line."""
    if host.kube:
        return kube.own_failure(returncode, stderr)
    return returncode in (126, 127, 255)


def explain(host: Host, returncode: int | None, stderr: str, retrying: bool = True) -> str:
    if host.kube:
        return kube.explain(host, returncode, stderr, retrying)
    return ssh.explain(host, returncode, stderr, retrying)


def cannot_run(fleet: Fleet, host: Host) -> str:
    """The transport's own program is missing: one line."""
    if host.kube:
        return kube.cannot_run(host, fleet.path)
    return (
        f"host {host.name}: cannot run the ssh command {fleet.ssh_command!r}; install OpenSSH's "
        f"client or set [ssh] command in {fleet.path}"
    )
