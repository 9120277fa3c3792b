"""`python -m sgltui.sim [SGLang flags] [--sim-* flags]`: an SGLang-compatible simulated server."""

from __future__ import annotations

if __name__ == "__main__":
    import sys

    from sgltui.sim.server import main

    sys.exit(main())
