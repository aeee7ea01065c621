"""``python -m stickypack``: the ``stickypack`` command."""

import sys

from stickypack.cli import main

sys.exit(main())
