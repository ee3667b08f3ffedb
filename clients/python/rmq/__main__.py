"""``python -m rmq``: see rmq.cli."""

import sys

from .cli import main

sys.exit(main())
