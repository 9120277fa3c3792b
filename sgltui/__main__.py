import sys

from sgltui.cli import main

sys.exit(main())
