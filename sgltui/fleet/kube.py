"""A Kubernetes host: its agent reached by `kubectl exec -i POD -- sgltui agent bridge`, a label
selector's pods listed as hosts, and kubectl's failures as one line naming the host and the fix.

kubectl gets an argv and passes the remote words to the container as an argv too (no shell on
either side, so nothing is quoted). It runs in its own process group, as ssh does, and is
stopped and reaped by the same code (fleet/client.py). kubectl exits 1 for its own failures
(forbidden, not found, no cluster) and with the remote command's code otherwise; its own are
told apart by what it writes (`Error from server`, `error:`, `Unable to connect`).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess

from sgltui.fleet.config import NAME_RE, Host

LIST_TIMEOUT_S = 15.0  # `kubectl get pods` for a selector, when the fleet file is read
_OWN = ("error from server", "error:", "unable to connect to the server", "unauthorized")


def _base(host: Host) -> list[str]:
    argv = [host.kubectl]
    if host.context:
        argv += ["--context", host.context]
    if host.namespace:
        argv += ["--namespace", host.namespace]
    return argv


def argv(host: Host, *words: str, tty: bool = False) -> list[str]:
    """kubectl exec of the remote sgltui with `words`; `tty`: an interactive command (-t)."""
    assert host.pod, "a selector host is listed into pod hosts first"
    cmd = [*_base(host), "exec", "-it" if tty else "-i", host.pod]
    if host.container:
        cmd += ["-c", host.container]
    return [*cmd, "--", *host.remote_argv(*words)]


def list_argv(host: Host) -> list[str]:
    return [*_base(host), "get", "pods", "-l", str(host.selector), "-o", "json"]


def own_failure(returncode: int | None, stderr: str) -> bool:
    """kubectl (not the far sgltui) failed: its exit and what it wrote say so."""
    if returncode in (126, 127):  # the container could not run the command
        return True
    last = _last(stderr).lower()
    return returncode not in (0, None) and last.startswith(_OWN)


def _last(stderr: str) -> str:
    lines = [x.strip() for x in stderr.strip().splitlines() if x.strip()]
    return lines[-1] if lines else ""


def explain(host: Host, returncode: int | None, stderr: str, retrying: bool = True) -> str:
    """kubectl's exit and stderr as one line: the host, what went wrong, what to do."""
    last = _last(stderr)
    low = stderr.lower()
    h = f"host {host.name} ({host.target})"
    ns = host.namespace or "its namespace"
    if "forbidden" in low:
        verb = "list pods" if host.selector and not host.pod else "create pods/exec"
        return (
            f"{h}: kubectl is not allowed to {verb} ({last}); ask for a Role with {verb} in "
            f"{ns} bound to your user, or set context = ... to one that has it"
        )
    if "unauthorized" in low or "must be logged in" in low:
        return f"{h}: the cluster refused kubectl's credentials ({last}); log in again"
    if "context" in low and "does not exist" in low:
        return f"{h}: {last}; fix context = ... in fleet.toml (kubectl config get-contexts)"
    if "notfound" in low.replace(" ", "") or "not found" in low and "pod" in low:
        return (
            f"{h}: no such pod ({last}); fix pod = ... in fleet.toml "
            f"(kubectl get pods{' -n ' + host.namespace if host.namespace else ''})"
        )
    if "unable to connect" in low or "i/o timeout" in low or "connection refused" in low:
        then = "retrying" if retrying else "check the cluster's address and the network"
        return f"{h}: the cluster is unreachable ({last}); {then}"
    if "container not found" in low or "is not running" in low or "completed pod" in low:
        return f"{h}: its container is not running ({last}); see kubectl describe pod"
    if returncode in (126, 127) or "executable file not found" in low:
        return (
            f"{h}: `{host.sgltui}` is not in the container's PATH; use an image with sgltui "
            f'(sgltui k8s render) or set sgltui = "/path/to/bin/sgltui" for this host'
        )
    if "invalid choice: 'bridge'" in low or "invalid choice: 'agent'" in low:
        return f"{h}: its sgltui has no `agent bridge` (an older release); upgrade the image"
    if last:
        return f"{h}: {last}"
    return f"{h}: kubectl exec ended (exit {returncode})"


def cannot_run(host: Host, path: object) -> str:
    return (
        f"host {host.name}: cannot run kubectl {host.kubectl!r}; install it or set "
        f'kubectl = "/path/to/kubectl" for this host in {path}'
    )


def pod_hosts(host: Host) -> list[Host]:
    """A selector host as one host per pod it lists (NAME.POD, address = the pod's IP); when the
    listing fails or finds none, the host itself, whose link then says why (`pods_error`)."""
    if not host.selector or host.pod:
        return [host]
    where = f"selector {host.selector} in {host.namespace or 'the default namespace'}"
    try:
        proc = subprocess.run(
            list_argv(host),
            capture_output=True,
            text=True,
            timeout=LIST_TIMEOUT_S,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
    except (FileNotFoundError, PermissionError):
        return [dataclasses.replace(host, pods_error=cannot_run(host, "fleet.toml"))]
    except subprocess.TimeoutExpired:
        why = f"host {host.name}: kubectl get pods gave no answer within {LIST_TIMEOUT_S:.0f}s"
        return [dataclasses.replace(host, pods_error=why + "; is the cluster reachable?")]
    if proc.returncode != 0:
        return [dataclasses.replace(host, pods_error=explain(host, proc.returncode, proc.stderr))]
    try:
        items = json.loads(proc.stdout).get("items") or []
    except (ValueError, AttributeError):
        why = f"host {host.name}: kubectl get pods did not answer JSON; check kubectl = ..."
        return [dataclasses.replace(host, pods_error=why)]
    out: list[Host] = []
    for item in items:
        meta, status = item.get("metadata") or {}, item.get("status") or {}
        pod = meta.get("name")
        if not isinstance(pod, str) or meta.get("deletionTimestamp"):
            continue  # a pod on its way out is no host
        name = f"{host.name}.{pod}"
        if not NAME_RE.match(name):
            name = f"{host.name}.{len(out)}"
        ip = status.get("podIP")
        out.append(
            dataclasses.replace(
                host, name=name, pod=pod, address=ip if isinstance(ip, str) and ip else None
            )
        )
    if not out:
        why = (
            f"host {host.name}: {where} matches no pods; check `kubectl get pods -l "
            f"{host.selector}` (the pods' labels), then start sgltui again"
        )
        return [dataclasses.replace(host, pods_error=why)]
    return out
