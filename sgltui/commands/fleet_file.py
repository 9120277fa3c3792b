"""The fleet file a command works on (`--fleet FILE`, else $SGLTUI_FLEET or the default), for
`sgltui fleet ...` and for a bare `sgltui` that opens the app on a fleet."""

from __future__ import annotations

import argparse
from pathlib import Path

from sgltui.commands import CliError
from sgltui.fleet import config as fleet_config
from sgltui.fleet import kube


def load(args: argparse.Namespace, list_pods: bool = True) -> fleet_config.Fleet:
    """The fleet, each Kubernetes selector listed into its pods (`kubectl get pods`) unless
    `list_pods` is False (a command for one host that is no selector's pod needs none)."""
    path = getattr(args, "fleet_file", None)
    lister = kube.pod_hosts if list_pods else None
    try:
        return fleet_config.load(Path(path).expanduser() if path else None, pods=lister)
    except fleet_config.FleetConfigError as exc:
        raise CliError(str(exc)) from None
