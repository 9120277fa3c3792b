"""`python -m sgltui.agent`: run the agent (normally started on demand by a client)."""

import sys

from sgltui.agent.daemon import main

if __name__ == "__main__":
    sys.exit(main())
