"""The fleet file a command works on (`--fleet FILE`, else $SGLTUI_FLEET or the default), for
`sgltui fleet ...` and for a bare `sgltui` that opens the app on a fleet."""

from __future__ import annotations

import argparse
from pathlib import Path

from sgltui.commands import CliError
from sgltui.fleet import config as fleet_config


def load(args: argparse.Namespace) -> fleet_config.Fleet:
    path = getattr(args, "fleet_file", None)
    try:
        return fleet_config.load(Path(path).expanduser() if path else None)
    except fleet_config.FleetConfigError as exc:
        raise CliError(str(exc)) from None
